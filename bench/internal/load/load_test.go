package load

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadStream(t *testing.T) {
	long := "data: " + strings.Repeat("x", 10000) + "\n\n"
	tests := []struct {
		name     string
		body     string
		wantErr  string
		wantData bool
	}{
		{"complete", "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n", "", true},
		{"keep-alive comment first", ": ping\n\ndata: {}\n\ndata: [DONE]\n\n", "", true},
		{"long frame", long + "data: [DONE]\n\n", "", true},
		{"no DONE", "data: {}\n\n", "stream ended without data: [DONE]", true},
		{"DONE inside a long line does not count", "data: " + strings.Repeat("y", 5000) + "data: [DONE]\n", "stream ended without data: [DONE]", true},
		{"empty", "", "stream ended without data: [DONE]", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := readStream(strings.NewReader(tt.body), time.Now())
			if o.errKind != tt.wantErr {
				t.Fatalf("errKind = %q, want %q", o.errKind, tt.wantErr)
			}
			if got := o.firstData > 0; got != tt.wantData {
				t.Fatalf("first data seen = %v (%v), want %v", got, o.firstData, tt.wantData)
			}
		})
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestReadStreamCutMidBody(t *testing.T) {
	r := io.MultiReader(strings.NewReader("data: {}\n\n"), failingReader{io.ErrUnexpectedEOF})
	if o := readStream(r, time.Now()); o.errKind != "unexpected EOF" {
		t.Fatalf("errKind = %q, want unexpected EOF", o.errKind)
	}
}

func TestClassifyHidesURL(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&url.Error{Op: "Post", URL: "http://127.0.0.1:1/v1/chat/completions", Err: syscall.ECONNREFUSED}, "connection refused"},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), "connection reset"},
		{&url.Error{Op: "Post", URL: "http://127.0.0.1:1/secret", Err: errors.New("boom")}, "boom"},
		{io.ErrUnexpectedEOF, "unexpected EOF"},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("classify(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestErrorBookCapsKinds(t *testing.T) {
	var b errorBook
	for i := range maxErrorKinds + 5 {
		b.add(fmt.Sprintf("kind %d", i))
	}
	b.add("kind 0")
	m := b.snapshot()
	if len(m) != maxErrorKinds+1 {
		t.Fatalf("%d kinds kept, want %d plus other", len(m), maxErrorKinds)
	}
	if m["other"] != 5 || m["kind 0"] != 2 {
		t.Fatalf("counts = %v, want other=5 and kind 0=2", m)
	}
}
