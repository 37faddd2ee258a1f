package sdk

import (
	"errors"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// This file is a small JSON codec for the five hook types. Guests do not use
// encoding/json: reflection is slow in WebAssembly (a Go guest runs every
// loop under the host's deadline check) and doubles the module size. The
// encoder writes exactly what encoding/json writes for the same value (key
// order, omitempty, escaping, sorted map keys); the decoder accepts what
// encoding/json accepts for these types, except that keys match exactly
// (encoding/json also matches them case-insensitively). Tests hold both
// properties against encoding/json.

// maxDepth bounds the nesting of skipped unknown values.
const maxDepth = 64

var (
	errSyntax = errors.New("sdk: invalid JSON")
	errNumber = errors.New("sdk: JSON number is not an integer in range")
	errDepth  = errors.New("sdk: JSON nested too deeply")
)

// ---- encoding ----

// encoder appends one JSON object to b.
type encoder struct {
	b     []byte
	first bool
}

func (e *encoder) open() { e.b = append(e.b, '{'); e.first = true }

func (e *encoder) close() { e.b = append(e.b, '}') }

func (e *encoder) key(k string) {
	if !e.first {
		e.b = append(e.b, ',')
	}
	e.first = false
	e.b = append(e.b, '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

func (e *encoder) str(k, v string, omitEmpty bool) {
	if omitEmpty && v == "" {
		return
	}
	e.key(k)
	e.b = appendString(e.b, v)
}

func (e *encoder) int(k string, v int64, omitEmpty bool) {
	if omitEmpty && v == 0 {
		return
	}
	e.key(k)
	e.b = strconv.AppendInt(e.b, v, 10)
}

// strMap writes a map[string]string with sorted keys; omitEmpty skips an
// empty or nil map, otherwise nil is written as null.
func (e *encoder) strMap(k string, m map[string]string, omitEmpty bool) {
	if omitEmpty && len(m) == 0 {
		return
	}
	e.key(k)
	if m == nil {
		e.b = append(e.b, "null"...)
		return
	}
	keys := make([]string, 0, len(m))
	for mk := range m {
		keys = append(keys, mk)
	}
	slices.Sort(keys)
	e.b = append(e.b, '{')
	for i, mk := range keys {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = appendString(e.b, mk)
		e.b = append(e.b, ':')
		e.b = appendString(e.b, m[mk])
	}
	e.b = append(e.b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json does
// (HTML characters, U+2028 and U+2029 escaped; invalid UTF-8 becomes
// U+FFFD).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendErrorInput(b []byte, v *ErrorInput) []byte {
	e := encoder{b: b}
	e.open()
	e.str("provider", v.Provider, false)
	e.str("connection", v.Connection, false)
	e.str("model", v.Model, false)
	e.str("profile", v.Profile, false)
	e.int("status", int64(v.Status), false)
	e.strMap("headers", v.Headers, true)
	e.str("error_code", v.ErrorCode, true)
	e.str("error_type", v.ErrorType, true)
	e.str("body", v.Body, true)
	e.close()
	return e.b
}

func appendRestatement(b []byte, v *Restatement) []byte {
	e := encoder{b: b}
	e.open()
	e.int("status", int64(v.Status), false)
	e.int("retry_after_ms", v.RetryAfterMS, true)
	e.str("rule_id", v.RuleID, true)
	e.close()
	return e.b
}

func appendDecision(b []byte, v *Decision) []byte {
	e := encoder{b: b}
	e.open()
	e.str("reason", v.Reason, false)
	e.str("scope", v.Scope, true)
	e.int("cooldown_ms", v.CooldownMS, true)
	e.str("rule_id", v.RuleID, true)
	e.close()
	return e.b
}

func appendRequestInfo(b []byte, v *RequestInfo) []byte {
	e := encoder{b: b}
	e.open()
	e.str("model", v.Model, false)
	e.str("path", v.Path, false)
	e.str("key_id", v.KeyID, true)
	e.strMap("headers", v.Headers, true)
	e.close()
	return e.b
}

func appendRequestAction(b []byte, v *RequestAction) []byte {
	e := encoder{b: b}
	e.open()
	e.str("model", v.Model, true)
	e.strMap("set_headers", v.SetHeaders, true)
	e.int("reject_status", int64(v.RejectStatus), true)
	e.str("reject_message", v.RejectMessage, true)
	e.close()
	return e.b
}

// ---- decoding ----

// decoder reads one JSON document from b. Decoded strings without escapes
// are substrings of b, so a document costs one copy however many fields it
// has (allocation dominates a WebAssembly guest's cost).
type decoder struct {
	b string
	i int
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// literal consumes the literal lit ("null", "true", "false").
func (d *decoder) literal(lit string) error {
	if len(d.b)-d.i < len(lit) || d.b[d.i:d.i+len(lit)] != lit {
		return errSyntax
	}
	d.i += len(lit)
	return nil
}

// null consumes a null and reports whether there was one.
func (d *decoder) null() (bool, error) {
	if d.peek() != 'n' {
		return false, nil
	}
	return true, d.literal("null")
}

// openObject consumes a null (null true) or the '{' of an object.
func (d *decoder) openObject() (null bool, err error) {
	if isNull, err := d.null(); isNull || err != nil {
		return isNull, err
	}
	if d.peek() != '{' {
		return false, errSyntax
	}
	d.i++
	return false, nil
}

// nextKey reads the next key of an object opened with openObject and
// leaves the decoder at its value; ok is false once the closing '}' is
// consumed. first is true for the first call on an object.
func (d *decoder) nextKey(first bool) (key string, ok bool, err error) {
	c := d.peek()
	if c == '}' {
		d.i++
		return "", false, nil
	}
	if !first {
		if c != ',' {
			return "", false, errSyntax
		}
		d.i++
		c = d.peek()
	}
	if c != '"' {
		return "", false, errSyntax
	}
	if key, err = d.rawString(); err != nil {
		return "", false, err
	}
	if d.peek() != ':' {
		return "", false, errSyntax
	}
	d.i++
	d.ws()
	return key, true, nil
}

// str reads a string or null into *v (null leaves *v unchanged).
func (d *decoder) str(v *string) error {
	if isNull, err := d.null(); isNull || err != nil {
		return err
	}
	if d.peek() != '"' {
		return errSyntax
	}
	s, err := d.rawString()
	if err != nil {
		return err
	}
	*v = s
	return nil
}

// rawString reads a string starting at the opening quote.
func (d *decoder) rawString() (string, error) {
	d.i++ // opening quote
	start := d.i
	d.i = plainRun(d.b, d.i)
	if d.i < len(d.b) && d.b[d.i] == '"' {
		s := d.b[start:d.i]
		d.i++
		return s, nil
	}
	return d.slowString(start)
}

// SWAR constants: one bit or one value in every byte of a word.
const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// plainRun returns the index of the first byte at or after i that needs
// attention in a JSON string (a quote, a backslash, a control character or
// a non-ASCII byte), or len(s). It tests eight bytes per step: in a guest
// every loop iteration costs a trip through the host's deadline check.
func plainRun(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		_ = s[i+7]
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		q := x ^ (lsbs * '"')
		b := x ^ (lsbs * '\\')
		// Each term flags its bytes exactly up to the first one flagged, so
		// the lowest flag is the first special byte.
		m := ((q-lsbs)&^q | (b-lsbs)&^b | (x-lsbs*0x20)&^x | x) & msbs
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return i
		}
	}
	return i
}

// slowString decodes a string with escapes or non-ASCII text; d.i is at
// the first such byte and start at the string's first byte.
func (d *decoder) slowString(start int) (string, error) {
	out := make([]byte, 0, d.i-start+64)
	out = append(out, d.b[start:d.i]...)
	for d.i < len(d.b) {
		if j := plainRun(d.b, d.i); j > d.i {
			out = append(out, d.b[d.i:j]...)
			d.i = j
			continue
		}
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return string(out), nil
		case c < 0x20:
			return "", errSyntax
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return "", errSyntax
			}
			esc := d.b[d.i+1]
			d.i += 2
			switch esc {
			case '"', '\\', '/':
				out = append(out, esc)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return "", errSyntax
				}
				if utf16IsSurrogate(r) {
					if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
						save := d.i
						d.i += 2
						r2, ok := d.hex4()
						if !ok {
							return "", errSyntax
						}
						if dec := utf16Decode(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							continue
						}
						d.i = save // not a pair: the second escape stands alone
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", errSyntax
			}
		default: // non-ASCII
			r, size := utf8.DecodeRuneInString(d.b[d.i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, d.b[d.i:d.i+size]...)
			}
			d.i += size
		}
	}
	return "", errSyntax
}

func (d *decoder) hex4() (rune, bool) {
	if len(d.b)-d.i < 4 {
		return 0, false
	}
	var r rune
	for j := d.i; j < d.i+4; j++ {
		c := d.b[j]
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	d.i += 4
	return r, true
}

func utf16IsSurrogate(r rune) bool { return r >= 0xd800 && r < 0xe000 }

func utf16Decode(r1, r2 rune) rune {
	if r1 >= 0xd800 && r1 < 0xdc00 && r2 >= 0xdc00 && r2 < 0xe000 {
		return (r1-0xd800)<<10 | (r2 - 0xdc00) + 0x10000
	}
	return utf8.RuneError
}

// int64 reads an integer number or null into *v, rejecting fractions,
// exponents and values outside [lo, hi].
func (d *decoder) int64(v *int64, lo, hi int64) error {
	if isNull, err := d.null(); isNull || err != nil {
		return err
	}
	start := d.i
	neg := false
	if d.i < len(d.b) && d.b[d.i] == '-' {
		neg = true
		d.i++
	}
	digits := d.i
	var n uint64
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		if n > (1<<63)/10 {
			return errNumber
		}
		n = n*10 + uint64(d.b[d.i]-'0')
		d.i++
	}
	if d.i == digits || (d.b[digits] == '0' && d.i-digits > 1) {
		d.i = start
		return errSyntax
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return errNumber
		}
	}
	var x int64
	switch {
	case neg && n <= 1<<63:
		x = int64(-n)
	case !neg && n < 1<<63:
		x = int64(n)
	default:
		return errNumber
	}
	if x < lo || x > hi {
		return errNumber
	}
	*v = x
	return nil
}

func (d *decoder) int(v *int) error {
	x := int64(*v)
	if err := d.int64(&x, minInt, maxInt); err != nil {
		return err
	}
	*v = int(x)
	return nil
}

const (
	maxInt = int64(^uint(0) >> 1)
	minInt = -maxInt - 1
)

// strMap reads an object of strings (or null, which sets *m to nil).
func (d *decoder) strMap(m *map[string]string) error {
	if d.peek() == 'n' {
		*m = nil
		return d.literal("null")
	}
	if d.peek() != '{' {
		return errSyntax
	}
	if _, err := d.openObject(); err != nil {
		return err
	}
	if *m == nil {
		*m = make(map[string]string)
	}
	for first := true; ; first = false {
		k, ok, err := d.nextKey(first)
		if err != nil || !ok {
			return err
		}
		var v string
		if err := d.str(&v); err != nil {
			return err
		}
		(*m)[k] = v
	}
}

// skip reads and discards any JSON value.
func (d *decoder) skip(depth int) error {
	if depth > maxDepth {
		return errDepth
	}
	switch c := d.peek(); {
	case c == '"':
		_, err := d.rawString()
		return err
	case c == '{':
		if _, err := d.openObject(); err != nil {
			return err
		}
		for first := true; ; first = false {
			_, ok, err := d.nextKey(first)
			if err != nil || !ok {
				return err
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
	case c == '[':
		d.i++
		if d.peek() == ']' {
			d.i++
			return nil
		}
		for {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			switch d.peek() {
			case ',':
				d.i++
			case ']':
				d.i++
				return nil
			default:
				return errSyntax
			}
		}
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return errSyntax
}

// number reads any JSON number.
func (d *decoder) number() error {
	if d.b[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	start := d.i
	if n := digits(); n == 0 || (n > 1 && d.b[start] == '0') {
		return errSyntax
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return errSyntax
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return errSyntax
		}
	}
	return nil
}

// end finishes a top-level document: it returns err, or a syntax error
// when anything but space follows the value.
func (d *decoder) end(err error) error {
	if err != nil {
		return err
	}
	if d.peek() != 0 || d.i != len(d.b) {
		return errSyntax
	}
	return nil
}

// The decoders below share one shape, written out per type so the decoder
// stays on the stack (a callback would move it to the heap).

func decodeErrorInput(b []byte, v *ErrorInput) error {
	d := decoder{b: string(b)}
	null, err := d.openObject()
	for first := true; err == nil && !null; first = false {
		var k string
		var ok bool
		if k, ok, err = d.nextKey(first); err != nil || !ok {
			break
		}
		switch k {
		case "provider":
			err = d.str(&v.Provider)
		case "connection":
			err = d.str(&v.Connection)
		case "model":
			err = d.str(&v.Model)
		case "profile":
			err = d.str(&v.Profile)
		case "status":
			err = d.int(&v.Status)
		case "headers":
			err = d.strMap(&v.Headers)
		case "error_code":
			err = d.str(&v.ErrorCode)
		case "error_type":
			err = d.str(&v.ErrorType)
		case "body":
			err = d.str(&v.Body)
		default:
			err = d.skip(0)
		}
	}
	return d.end(err)
}

func decodeRestatement(b []byte, v *Restatement) error {
	d := decoder{b: string(b)}
	null, err := d.openObject()
	for first := true; err == nil && !null; first = false {
		var k string
		var ok bool
		if k, ok, err = d.nextKey(first); err != nil || !ok {
			break
		}
		switch k {
		case "status":
			err = d.int(&v.Status)
		case "retry_after_ms":
			err = d.int64(&v.RetryAfterMS, minInt64, maxInt64)
		case "rule_id":
			err = d.str(&v.RuleID)
		default:
			err = d.skip(0)
		}
	}
	return d.end(err)
}

func decodeDecision(b []byte, v *Decision) error {
	d := decoder{b: string(b)}
	null, err := d.openObject()
	for first := true; err == nil && !null; first = false {
		var k string
		var ok bool
		if k, ok, err = d.nextKey(first); err != nil || !ok {
			break
		}
		switch k {
		case "reason":
			err = d.str(&v.Reason)
		case "scope":
			err = d.str(&v.Scope)
		case "cooldown_ms":
			err = d.int64(&v.CooldownMS, minInt64, maxInt64)
		case "rule_id":
			err = d.str(&v.RuleID)
		default:
			err = d.skip(0)
		}
	}
	return d.end(err)
}

func decodeRequestInfo(b []byte, v *RequestInfo) error {
	d := decoder{b: string(b)}
	null, err := d.openObject()
	for first := true; err == nil && !null; first = false {
		var k string
		var ok bool
		if k, ok, err = d.nextKey(first); err != nil || !ok {
			break
		}
		switch k {
		case "model":
			err = d.str(&v.Model)
		case "path":
			err = d.str(&v.Path)
		case "key_id":
			err = d.str(&v.KeyID)
		case "headers":
			err = d.strMap(&v.Headers)
		default:
			err = d.skip(0)
		}
	}
	return d.end(err)
}

func decodeRequestAction(b []byte, v *RequestAction) error {
	d := decoder{b: string(b)}
	null, err := d.openObject()
	for first := true; err == nil && !null; first = false {
		var k string
		var ok bool
		if k, ok, err = d.nextKey(first); err != nil || !ok {
			break
		}
		switch k {
		case "model":
			err = d.str(&v.Model)
		case "set_headers":
			err = d.strMap(&v.SetHeaders)
		case "reject_status":
			err = d.int(&v.RejectStatus)
		case "reject_message":
			err = d.str(&v.RejectMessage)
		default:
			err = d.skip(0)
		}
	}
	return d.end(err)
}

const (
	maxInt64 = int64(1<<63 - 1)
	minInt64 = -maxInt64 - 1
)
