package sdk

import (
	"iter"
	"slices"
	"strings"
)

// Headers is the read-only set of HTTP headers of a hook input, names
// lower-cased by the host. It reads the host's encoding in place: decoding
// an input costs no allocation per header, and a lookup scans the few
// headers an error response carries. The zero value is empty; NewHeaders
// builds one (in tests). Values are safe to keep after the call.
type Headers struct {
	enc string // n × (u32 little-endian length, name, u32 length, value)
	n   int
}

// NewHeaders returns Headers holding m (names are lower-cased, as the host
// does).
func NewHeaders(m map[string]string) Headers {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	var b []byte
	for _, k := range names {
		b = appendString(b, strings.ToLower(k))
		b = appendString(b, m[k])
	}
	return Headers{enc: string(b), n: len(m)}
}

// Len returns the number of headers.
func (h Headers) Len() int { return h.n }

// Lookup returns the value of the header name (matched without regard to
// ASCII case) and whether it is present.
func (h Headers) Lookup(name string) (string, bool) {
	s := h.enc
	for range h.n {
		var k, v string
		k, s = cutString(s)
		v, s = cutString(s)
		if len(k) == len(name) && (k == name || strings.EqualFold(k, name)) {
			return v, true
		}
	}
	return "", false
}

// Get returns the value of the header name, or "" when it is absent.
func (h Headers) Get(name string) string {
	v, _ := h.Lookup(name)
	return v
}

// All iterates over the headers in the order the host sent them.
func (h Headers) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		s := h.enc
		for range h.n {
			var k, v string
			k, s = cutString(s)
			v, s = cutString(s)
			if !yield(k, v) {
				return
			}
		}
	}
}

// Map returns the headers as a new map.
func (h Headers) Map() map[string]string {
	m := make(map[string]string, h.n)
	for k, v := range h.All() {
		m[k] = v
	}
	return m
}

// cutString splits an encoded string off the front of s; s was validated
// when the Headers were decoded.
func cutString(s string) (string, string) {
	n := int(uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24)
	return s[4 : 4+n], s[4+n:]
}
