package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
)

// maxDepth is encoding/json's nesting limit: to it, a document with more
// than maxDepth nested objects and arrays is not valid JSON.
const maxDepth = 10000

// errSyntax is any departure from the JSON grammar (RFC 8259, as
// encoding/json reads it).
var errSyntax = errors.New("not valid JSON")

// scanner walks a JSON document in one pass, checking its grammar exactly
// as encoding/json does (json.Valid accepts a document if and only if the
// scanner does): strings without control bytes and with valid escapes
// (invalid UTF-8 is accepted, as encoding/json accepts it), numbers of the
// JSON grammar, the three literals, and at most maxDepth nested
// containers.
type scanner struct {
	b []byte
	i int
	// depth is how many containers enclose the value skipValue reads
	// (1 for a member of the top-level object).
	depth int
	// checked reports that request walked the whole document, or found
	// it invalid.
	checked bool
}

// Valid reports whether b is one JSON value with only whitespace around
// it: json.Valid, in the scanner's single pass (strings 8 bytes at a
// time, long runs of plain content with vector instructions: plainRun),
// without allocating.
func Valid(b []byte) bool {
	s := scanner{b: b}
	s.ws()
	if s.skipValue() != nil {
		return false
	}
	return s.end()
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// SWAR constants: a byte repeated in every lane of a uint64, and the lanes'
// high bits.
const (
	lanes = 0x0101010101010101
	highs = 0x8080808080808080
)

// stringStops marks, with the high bit of its byte, each of the eight
// bytes of v that ends a run of plain string content: a quote, a
// backslash or a control byte (< 0x20). The lowest marked byte is exact;
// a byte above a marked one may be marked too (a borrow), which costs a
// look, never a miss.
func stringStops(v uint64) uint64 {
	q := v ^ (lanes * '"')
	e := v ^ (lanes * '\\')
	return ((q-lanes)&^q | (e-lanes)&^e | (v-lanes*0x20)&^v) & highs
}

// skipString checks and skips one JSON string (quotes included).
func (s *scanner) skipString() error {
	if !s.eat('"') {
		return errSyntax
	}
	b, i := s.b, s.i
	runWords := plainRunWords
	if vectorStops {
		runWords = vectorRunWords
	}
	for {
		for run := 0; i+8 <= len(b); run++ {
			if m := stringStops(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
			if run == runWords {
				i = plainRun(b, i)
			}
		}
		if i >= len(b) {
			s.i = i
			return errSyntax
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return nil
		case c == '\\':
			n, ok := escape(b[i+1:])
			if !ok {
				s.i = i
				return errSyntax
			}
			i += 1 + n
		case c < 0x20:
			s.i = i
			return errSyntax
		default:
			i++
		}
	}
}

// plainRunWords is how many words of plain content skipString reads one
// by one before it takes the run for a long one and hands it to plainRun
// (shorter runs, between the escapes of code or the fields of a message,
// are faster word by word). vectorRunWords is the same with vectorStops:
// a vector call costs less than a few words.
const (
	plainRunWords  = 15
	vectorRunWords = 2
)

// plainRunWindow bounds how far plainRun looks for a quote or a backslash
// at once, so that a long string with many escapes is not searched to its
// end at every escape.
const plainRunWindow = 2048

// plainRunSWAR is plainRun without vector code of the gateway's own:
// several times faster than word by word, it finds the next quote and
// backslash with bytes.IndexByte (vector instructions) and checks only for
// control bytes before them, 32 bytes at a time. It returns a position at
// most 32 bytes before the next byte that may end the run (a quote, a
// backslash, a control byte, or the end of b).
func plainRunSWAR(b []byte, i int) int {
	for {
		w := b[i:min(len(b), i+plainRunWindow)]
		full := len(w)
		if k := bytes.IndexByte(w, '"'); k >= 0 {
			w = w[:k]
		}
		if k := bytes.IndexByte(w, '\\'); k >= 0 {
			w = w[:k]
		}
		j := 0
		for ; j+32 <= len(w); j += 32 {
			x := w[j : j+32]
			v0, v1 := binary.LittleEndian.Uint64(x), binary.LittleEndian.Uint64(x[8:])
			v2, v3 := binary.LittleEndian.Uint64(x[16:]), binary.LittleEndian.Uint64(x[24:])
			if ((v0-lanes*0x20)&^v0|(v1-lanes*0x20)&^v1|(v2-lanes*0x20)&^v2|(v3-lanes*0x20)&^v3)&highs != 0 {
				return i + j // a control byte in these 32
			}
		}
		if j < full || full < plainRunWindow {
			return i + j // the run ends within 32 bytes, or b does
		}
		i += j // a whole window of plain content
	}
}

// escape checks the escape sequence after a backslash at the start of b and
// returns its length.
func escape(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	switch b[0] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 1, true
	case 'u':
		if len(b) < 5 || !hex(b[1]) || !hex(b[2]) || !hex(b[3]) || !hex(b[4]) {
			return 0, false
		}
		return 5, true
	}
	return 0, false
}

func hex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func digit(c byte) bool { return '0' <= c && c <= '9' }

// skipNumber checks and skips one JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) skipNumber() error {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && digit(b[i]); i++ {
		}
	default:
		return errSyntax
	}
	if i < len(b) && b[i] == '.' {
		if i++; i >= len(b) || !digit(b[i]) {
			return errSyntax
		}
		for i++; i < len(b) && digit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !digit(b[i]) {
			return errSyntax
		}
		for i++; i < len(b) && digit(b[i]); i++ {
		}
	}
	s.i = i
	return nil
}

// literal checks and skips the literal word (true, false, null).
func (s *scanner) literal(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return errSyntax
	}
	s.i += len(word)
	return nil
}

// member checks and skips an object member's key and colon, and the
// whitespace up to its value.
func (s *scanner) member() error {
	if err := s.skipString(); err != nil {
		return err
	}
	s.ws()
	if !s.eat(':') {
		return errSyntax
	}
	s.ws()
	return nil
}

// skipValue checks and skips one JSON value, objects and arrays whole. It
// walks nested containers with a stack of the bytes that close them, not
// by recursion.
func (s *scanner) skipValue() error {
	var stack [64]byte
	open := stack[:0] // the closing byte of each container entered
	for {
		if s.i >= len(s.b) {
			return errSyntax
		}
		switch c := s.b[s.i]; c {
		case '{', '[':
			if s.depth+len(open)+1 > maxDepth {
				return errSyntax
			}
			s.i++
			s.ws()
			closer := byte(']')
			if c == '{' {
				closer = '}'
			}
			if s.eat(closer) {
				break
			}
			open = append(open, closer)
			if closer == '}' {
				if err := s.member(); err != nil {
					return err
				}
			}
			continue
		case '"':
			if err := s.skipString(); err != nil {
				return err
			}
		case 't':
			if err := s.literal("true"); err != nil {
				return err
			}
		case 'f':
			if err := s.literal("false"); err != nil {
				return err
			}
		case 'n':
			if err := s.literal("null"); err != nil {
				return err
			}
		default:
			if err := s.skipNumber(); err != nil {
				return err
			}
		}
		// A value ended: close the containers that end here, then
		// go on to the next element or member.
		for {
			if len(open) == 0 {
				return nil
			}
			s.ws()
			if s.i >= len(s.b) {
				return errSyntax
			}
			c := s.b[s.i]
			s.i++
			if c == open[len(open)-1] {
				open = open[:len(open)-1]
				continue
			}
			if c != ',' {
				return errSyntax
			}
			s.ws()
			if open[len(open)-1] == '}' {
				if err := s.member(); err != nil {
					return err
				}
			}
			break
		}
	}
}

// restOfObject checks and skips the rest of an object after a member's
// value: further members, the closing brace, then only whitespace to the
// end of the document.
func (s *scanner) restOfObject() bool {
	for {
		s.ws()
		if s.eat('}') {
			return s.end()
		}
		if !s.eat(',') {
			return false
		}
		s.ws()
		if s.member() != nil || s.skipValue() != nil {
			return false
		}
	}
}
