package engine

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// maxJSONDepth is the nesting bound of encoding/json, which a body deeper
// than it fails, as it does there.
const maxJSONDepth = 10000

// jsonScan validates one JSON text in a single pass without building it,
// and reports the spans of the values the error message is read from.
// It accepts exactly what encoding/json accepts (strings may hold invalid
// UTF-8, which decoding replaces with U+FFFD).
type jsonScan struct {
	s     string
	i     int
	depth int
}

// ws skips JSON whitespace.
func (p *jsonScan) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value skips one value at p.i (after whitespace) and reports whether it
// is valid; p.i is then just past it.
func (p *jsonScan) value() bool {
	p.ws()
	if p.i >= len(p.s) {
		return false
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(nil)
	case c == '[':
		return p.array(nil)
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number()
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	}
	return false
}

func (p *jsonScan) lit(w string) bool {
	if !strings.HasPrefix(p.s[p.i:], w) {
		return false
	}
	p.i += len(w)
	return true
}

// number skips -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (p *jsonScan) number() bool {
	s := p.s
	if s[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(s) && '0' <= s[p.i] && s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	switch {
	case p.i < len(s) && s[p.i] == '0':
		p.i++
	case digits() == 0:
		return false
	}
	if p.i < len(s) && s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return false
		}
	}
	if p.i < len(s) && (s[p.i] == 'e' || s[p.i] == 'E') {
		p.i++
		if p.i < len(s) && (s[p.i] == '+' || s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// str skips the string at p.i and returns its raw text, quotes included.
func (p *jsonScan) str() (string, bool) {
	s, start := p.s, p.i
	p.i++
	for p.i < len(s) {
		c := s[p.i]
		switch {
		case c == '"':
			p.i++
			return s[start:p.i], true
		case c < 0x20:
			return "", false
		case c == '\\':
			p.i++
			if p.i >= len(s) {
				return "", false
			}
			switch s[p.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i++
			case 'u':
				if p.i+5 > len(s) {
					return "", false
				}
				for _, h := range []byte(s[p.i+1 : p.i+5]) {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return "", false
					}
				}
				p.i += 5
			default:
				return "", false
			}
		default:
			p.i++
		}
	}
	return "", false
}

// open enters the object or array at p.i, whose closing byte is close,
// and reports whether it is empty (then p.i is past it) and whether the
// nesting bound still holds. Every open is paired with a leave.
func (p *jsonScan) open(close byte) (empty, ok bool) {
	if p.depth++; p.depth > maxJSONDepth {
		return false, false
	}
	p.i++
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == close {
		p.i++
		return true, true
	}
	return false, true
}

func (p *jsonScan) leave() { p.depth-- }

// next reads what follows a member or element: a comma (more follow) or
// close (p.i is then past it); anything else is invalid.
func (p *jsonScan) next(close byte) (more, ok bool) {
	p.ws()
	if p.i >= len(p.s) {
		return false, false
	}
	switch p.s[p.i] {
	case ',':
		p.i++
		return true, true
	case close:
		p.i++
		return false, true
	}
	return false, false
}

// object skips the object at p.i; for each member it calls member (when
// not nil) with the member's raw key and raw value.
func (p *jsonScan) object(member func(key, value string)) bool {
	defer p.leave()
	if empty, ok := p.open('}'); empty || !ok {
		return ok
	}
	for {
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return false
		}
		key, ok := p.str()
		if !ok {
			return false
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return false
		}
		p.i++
		p.ws()
		start := p.i
		if !p.value() {
			return false
		}
		if member != nil {
			member(key, p.s[start:p.i])
		}
		if more, ok := p.next('}'); !more {
			return ok
		}
	}
}

// array skips the array at p.i; element (when not nil) gets each
// element's raw value.
func (p *jsonScan) array(element func(value string)) bool {
	defer p.leave()
	if empty, ok := p.open(']'); empty || !ok {
		return ok
	}
	for {
		p.ws()
		start := p.i
		if !p.value() {
			return false
		}
		if element != nil {
			element(p.s[start:p.i])
		}
		if more, ok := p.next(']'); !more {
			return ok
		}
	}
}

// end reports that only whitespace follows p.i.
func (p *jsonScan) end() bool {
	p.ws()
	return p.i == len(p.s)
}

// scanObject validates text, a JSON object and nothing else, and returns
// the raw values of the members whose names match names (as encoding/json
// matches a struct's field names: exactly or case-insensitively; the last
// of repeated members wins). It reports false when text is not valid JSON
// or not an object.
func scanObject(text string, names []string, values []string) bool {
	p := jsonScan{s: text}
	p.ws()
	if p.i >= len(text) || text[p.i] != '{' {
		return false
	}
	ok := p.object(func(key, value string) {
		k := unquoteJSON(key)
		for n, name := range names {
			if strings.EqualFold(k, name) {
				values[n] = value
			}
		}
	})
	return ok && p.end()
}

// scanFirstElement validates text, a JSON array and nothing else, and
// returns its first element's raw value ("" when empty).
func scanFirstElement(text string) (string, bool) {
	p := jsonScan{s: text}
	p.ws()
	if p.i >= len(text) || text[p.i] != '[' {
		return "", false
	}
	first, seen := "", false
	ok := p.array(func(value string) {
		if !seen {
			first, seen = value, true
		}
	})
	return first, ok && p.end()
}

// unquoteJSON returns the text of raw, a valid JSON string with its
// quotes. Without escapes and with valid UTF-8 it is the bytes between
// the quotes; otherwise encoding/json decodes it (escapes, invalid UTF-8
// replaced with U+FFFD).
func unquoteJSON(raw string) string {
	in := raw[1 : len(raw)-1]
	if !strings.ContainsRune(in, '\\') && utf8.ValidString(in) {
		return in
	}
	var s string
	if json.Unmarshal([]byte(raw), &s) != nil {
		return ""
	}
	return s
}
