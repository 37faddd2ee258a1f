package frames

import (
	"encoding/binary"
	"unicode/utf8"
)

// A minimal JSON reader for classifying stream events without decoding
// them: it walks one object's members, skips values it does not need and
// measures strings. Malformed input never panics; it ends the walk.

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// endOfString returns the index just past the closing quote of the string
// whose opening quote is at b[i], or -1.
func endOfString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// endOfValue returns the index just past the JSON value starting at b[i]
// (no leading space), or -1 when it is malformed or truncated.
func endOfValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return endOfString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				e := endOfString(b, i)
				if e < 0 {
					return -1
				}
				i = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(b) {
			c := b[j]
			if c == ',' || c == '}' || c == ']' || isSpace(c) {
				break
			}
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// members calls fn with each member of the JSON object obj: the raw key
// (between its quotes, escapes untouched) and the raw value. It stops when
// fn returns false or obj is not a well-formed object.
func members(obj []byte, fn func(key, val []byte) bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return
		}
		if obj[i] == ',' {
			i++
			continue
		}
		if obj[i] != '"' {
			return
		}
		ke := endOfString(obj, i)
		if ke < 0 {
			return
		}
		key := obj[i+1 : ke-1]
		i = skipSpace(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		ve := endOfValue(obj, i)
		if ve < 0 {
			return
		}
		if !fn(key, obj[i:ve]) {
			return
		}
		i = ve
	}
}

// elements calls fn with each element of the JSON array arr until fn
// returns false.
func elements(arr []byte, fn func(val []byte) bool) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for {
		i = skipSpace(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		if arr[i] == ',' {
			i++
			continue
		}
		ve := endOfValue(arr, i)
		if ve < 0 {
			return
		}
		if !fn(arr[i:ve]) {
			return
		}
		i = ve
	}
}

// field returns the raw value of the member key of obj, or nil.
func field(obj []byte, key string) []byte {
	var out []byte
	members(obj, func(k, v []byte) bool {
		if string(k) == key {
			out = v
			return false
		}
		return true
	})
	return out
}

// isString reports whether v is a JSON string.
func isString(v []byte) bool { return len(v) >= 2 && v[0] == '"' }

// isObject reports whether v is a JSON object.
func isObject(v []byte) bool { return len(v) >= 2 && v[0] == '{' }

// isNonEmptyArray reports whether v is a JSON array with an element.
func isNonEmptyArray(v []byte) bool {
	if len(v) < 2 || v[0] != '[' {
		return false
	}
	return skipSpace(v, 1) < len(v)-1
}

// present reports whether v is a value other than null.
func present(v []byte) bool { return len(v) > 0 && string(v) != "null" }

// stringValue returns the raw content of the JSON string v (escapes kept),
// for comparison with plain ASCII constants.
func stringValue(v []byte) []byte {
	if !isString(v) {
		return nil
	}
	return v[1 : len(v)-1]
}

// textBytes returns how many bytes of UTF-8 the JSON string v decodes to:
// escapes count as the bytes they stand for, invalid UTF-8 and lone
// surrogates as the 3 bytes of U+FFFD (as encoding/json decodes them). A
// value that is not a string counts 0.
func textBytes(v []byte) int {
	if !isString(v) {
		return 0
	}
	s := v[1 : len(v)-1]
	n := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while they are plain ASCII (no byte
		// with its high bit set, no backslash): a byte each.
		for i+8 <= len(s) {
			w := binary.LittleEndian.Uint64(s[i:])
			bs := w ^ 0x5c5c5c5c5c5c5c5c // '\\' in every byte
			if (w|((bs-0x0101010101010101)&^bs))&0x8080808080808080 != 0 {
				break
			}
			n += 8
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return n
			}
			if s[i+1] != 'u' {
				n++
				i += 2
				continue
			}
			r, ok := hex4(s, i+2)
			if !ok {
				return n
			}
			i += 6
			if r >= 0xD800 && r < 0xDC00 {
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if r2, ok := hex4(s, i+2); ok && r2 >= 0xDC00 && r2 < 0xE000 {
						n += 4
						i += 6
						continue
					}
				}
				n += 3
				continue
			}
			if r >= 0xDC00 && r < 0xE000 {
				n += 3
				continue
			}
			n += utf8.RuneLen(rune(r))
		case c < utf8.RuneSelf:
			n++
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				n += 3
			} else {
				n += size
			}
			i += size
		}
	}
	return n
}

// hex4 reads four hex digits at s[i:].
func hex4(s []byte, i int) (uint32, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r uint32
	for _, c := range s[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= uint32(c - '0')
		case c >= 'a' && c <= 'f':
			r |= uint32(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= uint32(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
