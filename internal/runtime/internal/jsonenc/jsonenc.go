// Package jsonenc appends JSON string literals without reflection, for the
// hand-written encoders on the streaming paths (mock answers, translated
// stream events) and the access log.
package jsonenc

import "unicode/utf8"

const hex = "0123456789abcdef"

// AppendString appends s to b as a JSON string literal. Control
// characters, quotes, backslashes, invalid UTF-8 (as U+FFFD) and
// U+2028/U+2029 are escaped, so the output is always valid JSON. It
// allocates only when b has to grow.
func AppendString(b []byte, s string) []byte { return appendString(b, s, false) }

// AppendStringStd is AppendString byte for byte as encoding/json's encoder
// writes s with HTML escaping on (its default): besides, <, > and & are
// escaped as \u003c, \u003e and \u0026, and backspace and form feed as \b
// and \f.
func AppendStringStd(b []byte, s string) []byte { return appendString(b, s, true) }

func appendString(b []byte, s string, std bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!std || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case std && c == '\b':
				b = append(b, '\\', 'b')
			case std && c == '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
