package sse

import (
	"bytes"
	"testing"
)

// BenchmarkReaderPerStream is the memory a Reader holds for one slow
// stream: a reader that has read one typical chunk (a Chat Completions
// delta of about 200 bytes). B/op is what every open stream keeps.
func BenchmarkReaderPerStream(b *testing.B) {
	chunk := []byte(`data: {"id":"chatcmpl-01","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"The lighthouse"},"finish_reason":null}]}` + "\n\n")
	src := bytes.NewReader(chunk)
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(chunk)
		r := NewReader(src)
		if ev, err := r.Next(); err != nil || len(ev.Data) == 0 {
			b.Fatal(err)
		}
	}
}
