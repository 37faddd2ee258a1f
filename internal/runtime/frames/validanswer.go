package frames

import (
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// ValidReader reads a whole answer of its wire format, as its
// AnswerReader does, while checking that the body is one valid JSON
// object (wire.Valid's grammar, nothing but whitespace around it), in a
// single pass over the body (its strings' text is measured again). ok is false when the body is not such an
// object; the Answer is then meaningless. ValidChatAnswer,
// ValidMessagesAnswer and ValidResponsesAnswer are the readers of the
// three formats; ValidObject only checks.
type ValidReader func(body []byte) (a Answer, ok bool)

// walk is a strict cursor over a JSON document: the containers an answer
// reader looks into are walked here, member by member, and every other
// value is checked and skipped by wire.SkipValue. Any departure from the
// grammar sets bad, after which every step fails.
type walk struct {
	b     []byte
	i     int
	depth int // containers enclosing the cursor
	bad   bool
}

func (w *walk) ws() { w.i = skipSpace(w.b, w.i) }

// open enters the container that starts at the cursor ('{' or '['; any
// other value fails) and reports whether it has a first member or
// element, the cursor then on it (an object's on its key).
func (w *walk) open(c byte) bool {
	if w.bad || w.i >= len(w.b) || w.b[w.i] != c {
		w.bad = true
		return false
	}
	w.i++
	w.depth++
	w.ws()
	closer := byte(']')
	if c == '{' {
		closer = '}'
	}
	if w.i < len(w.b) && w.b[w.i] == closer {
		w.i++
		w.depth--
		return false
	}
	return true
}

// key reads an object member's key and colon; the cursor is then on the
// value. It returns the key's raw bytes (between the quotes, escapes
// untouched).
func (w *walk) key() []byte {
	if w.bad || w.i >= len(w.b) || w.b[w.i] != '"' {
		w.bad = true
		return nil
	}
	start := w.i
	end := w.skip()
	if w.bad {
		return nil
	}
	w.ws()
	if w.i >= len(w.b) || w.b[w.i] != ':' {
		w.bad = true
		return nil
	}
	w.i++
	w.ws()
	return w.b[start+1 : end-1]
}

// value checks and skips the value at the cursor and returns its raw
// bytes.
func (w *walk) value() []byte {
	if w.bad {
		return nil
	}
	start := w.i
	return w.b[start:w.skip()]
}

// skip checks and skips the value at the cursor and returns where it
// ends. A short string of plain bytes (no escape, no control byte: most
// keys and short values) is skipped here; anything else — a longer text
// included, which wire reads eight bytes at a time — is
// wire.SkipValue's.
func (w *walk) skip() int {
	b, i := w.b, w.i
	if i < len(b) && b[i] == '"' {
		for i++; i < len(b) && i-w.i <= shortString; i++ {
			if c := b[i]; c == '"' {
				w.i = i + 1
				return w.i
			} else if c == '\\' || c < 0x20 {
				break
			}
		}
	}
	end, ok := wire.SkipValue(w.b, w.i, w.depth)
	if !ok {
		w.bad = true
		return w.i
	}
	w.i = end
	return end
}

// next moves past the separator after a member or element: true on a
// comma (the cursor then on the next one), false at the container's end
// (closer), which it leaves.
func (w *walk) next(closer byte) bool {
	if w.bad {
		return false
	}
	w.ws()
	if w.i < len(w.b) {
		switch w.b[w.i] {
		case ',':
			w.i++
			w.ws()
			return true
		case closer:
			w.i++
			w.depth--
			return false
		}
	}
	w.bad = true
	return false
}

// at reports whether the cursor is on a value starting with c.
func (w *walk) at(c byte) bool { return !w.bad && w.i < len(w.b) && w.b[w.i] == c }

// done reports whether the document was well formed and the cursor has
// reached its end (nothing but whitespace after the top-level value).
func (w *walk) done() bool {
	w.ws()
	return !w.bad && w.i == len(w.b)
}

// shortString is the length up to which skip reads a string itself.
const shortString = 24

// seek walks a top-level object up to its first member named key, the
// answer's array. known reports that member was there and an array: the
// cursor is then in the array, on its first element when more is true
// (the caller walks the elements, then calls rest). Otherwise the object
// has been walked to its end.
func (w *walk) seek(key string) (known, more bool) {
	w.ws()
	for m := w.open('{'); m; m = w.next('}') {
		k := w.key()
		if string(k) != key {
			w.value()
			continue
		}
		if !w.at('[') {
			w.value()
			w.rest()
			return false, false
		}
		return true, w.open('[')
	}
	return false, false
}

// rest walks the members of the top-level object after the answer's
// array, checking them only.
func (w *walk) rest() {
	for w.next('}') {
		w.key()
		w.value()
	}
}

// ValidObject checks that body is one valid JSON object, reading nothing:
// the ValidReader of formats without an answer reader.
func ValidObject(body []byte) (Answer, bool) {
	w := walk{b: body}
	w.ws()
	if !w.at('{') {
		return Answer{}, false
	}
	w.value()
	return Answer{}, w.done()
}

// ValidChatAnswer is ChatAnswer in one validating pass.
func ValidChatAnswer(body []byte) (Answer, bool) {
	var a Answer
	w := walk{b: body}
	known, more := w.seek("choices")
	for ; more; more = w.next(']') {
		if !w.at('{') {
			w.value()
			continue
		}
		for m := w.open('{'); m; m = w.next('}') {
			switch k := w.key(); string(k) {
			case "message", "delta":
				if !w.at('{') {
					w.value()
					continue
				}
				for mm := w.open('{'); mm; mm = w.next('}') {
					mk := w.key()
					a.chatMessageMember(mk, w.value())
				}
			case "text":
				a.Bytes += textBytes(w.value())
			default:
				w.value()
			}
		}
	}
	if known {
		w.rest()
	}
	a.Known = known
	return a, w.done()
}

// ValidMessagesAnswer is MessagesAnswer in one validating pass.
func ValidMessagesAnswer(body []byte) (Answer, bool) {
	var a Answer
	w := walk{b: body}
	known, more := w.seek("content")
	for ; more; more = w.next(']') {
		if !w.at('{') {
			w.value()
			continue
		}
		var typ, text []byte
		for m := w.open('{'); m; m = w.next('}') {
			k := w.key()
			v := w.value()
			switch string(k) {
			case "type":
				typ = stringValue(v)
			case "text":
				text = v
			}
		}
		a.messagesBlock(typ, text)
	}
	if known {
		w.rest()
	}
	a.Known = known
	return a, w.done()
}

// ValidResponsesAnswer is ResponsesAnswer in one validating pass.
func ValidResponsesAnswer(body []byte) (Answer, bool) {
	var a Answer
	w := walk{b: body}
	known, more := w.seek("output")
	for ; more; more = w.next(']') {
		if !w.at('{') {
			w.value()
			continue
		}
		var typ, content []byte
		var typSeen, contentSeen bool
		for m := w.open('{'); m; m = w.next('}') {
			k := w.key()
			v := w.value()
			switch {
			case string(k) == "type" && !typSeen:
				typ, typSeen = stringValue(v), true
			case string(k) == "content" && !contentSeen:
				content, contentSeen = v, true
			}
		}
		a.responsesItem(typ, content)
	}
	if known {
		w.rest()
	}
	a.Known = known
	return a, w.done()
}
