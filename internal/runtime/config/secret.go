package config

// GoString redacts the secret for the %#v verb, so no fmt verb that uses a
// method prints the value.
func (s Secret) GoString() string {
	if s == "" {
		return `""`
	}
	return `"[redacted]"`
}
