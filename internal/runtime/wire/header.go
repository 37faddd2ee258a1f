package wire

// ValidHeaderName reports whether n is an HTTP header field name: one or
// more token characters (RFC 9110 §5.1).
func ValidHeaderName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if !isToken(n[i]) {
			return false
		}
	}
	return true
}

// ValidHeaderValue reports whether v may be sent as an HTTP header field
// value: no control byte but horizontal tab, no DEL (RFC 9110 §5.5). A CR
// or LF would end the header, a NUL is refused by every HTTP stack; net/http
// refuses to send such a value at all.
func ValidHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func isToken(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
