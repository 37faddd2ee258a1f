package proxy

import (
	"net/http"

	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
)

// answerHeader is an upstream answer's headers as the proxy reads them:
// the http.Header of an answer of the net/http client, or a buffered
// answer's fields (upstream.Buffered), read where they lie so that a
// success builds no map of them.
type answerHeader struct {
	h http.Header
	b *upstream.Buffered
}

// all yields each header's name (canonical) and value: the first value of
// each name of an http.Header; every field of a buffered answer, in
// order, so a repeated name comes more than once (its first value first).
func (a answerHeader) all(yield func(name, value string) bool) {
	for k, v := range a.h {
		if len(v) > 0 && !yield(k, v[0]) {
			return
		}
	}
	if a.b != nil {
		for _, f := range a.b.Fields {
			if !yield(f.Name, f.Value) {
				return
			}
		}
	}
}
