package wire

import "encoding/json"

// Splice is an upstream request body held as the pieces it is written
// from: a client body with its model value replaced is the bytes before
// the value, the new value and the bytes after it, so that sending it
// copies nothing of the client's body. A Splice from SpliceModel aliases
// the client's body and is valid only as long as that body is; one from
// Owned holds bytes of its own.
type Splice struct {
	head, value, tail []byte
	// owned: head is the body's own memory (the others are empty).
	owned bool
}

// Owned returns the Splice of a body that owns its bytes (a translation's
// output): Detached returns b itself.
func Owned(b []byte) Splice { return Splice{head: b, owned: true} }

// SpliceModel returns body with the model value replaced by model, as a
// Splice that aliases body (nothing is copied). The result equals
// RewriteModel's byte for byte. Parse must have returned r for body.
func (r Request) SpliceModel(body []byte, model string) Splice {
	if model == r.Model {
		return Splice{head: body}
	}
	return Splice{head: body[:r.modelStart], value: quoteModel(model), tail: body[r.modelEnd:]}
}

// quoteModel returns model as a JSON string, as json.Marshal writes it,
// in one allocation for a model name of printable ASCII that json.Marshal
// leaves unescaped (every configured model name in practice).
func quoteModel(model string) []byte {
	for i := 0; i < len(model); i++ {
		if c := model[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(model)
			return q
		}
	}
	q := make([]byte, len(model)+2)
	q[0], q[len(q)-1] = '"', '"'
	copy(q[1:], model)
	return q
}

// Len returns the body's length in bytes.
func (s Splice) Len() int { return len(s.head) + len(s.value) + len(s.tail) }

// Single returns the body as one slice when it is one piece (no value was
// replaced), without copying; ok is false otherwise.
func (s Splice) Single() (b []byte, ok bool) {
	if len(s.value) > 0 || len(s.tail) > 0 {
		return nil, false
	}
	return s.head, true
}

// Pieces returns the body's pieces in order (some may be empty).
func (s Splice) Pieces() [3][]byte { return [3][]byte{s.head, s.value, s.tail} }

// AppendTo appends the body to dst.
func (s Splice) AppendTo(dst []byte) []byte {
	return append(append(append(dst, s.head...), s.value...), s.tail...)
}

// Detached returns the body as one slice that does not alias the client's
// body (for a write that may outlive it): an Owned body's bytes, else a
// copy.
func (s Splice) Detached() []byte {
	if s.owned {
		return s.head
	}
	return s.AppendTo(make([]byte, 0, s.Len()))
}
