package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestWriteRequestMatchesStandardLibrary pins writeRequest to
// http.Request.Write: the same bytes for every request, those it writes
// itself (leanRequest) and those it hands to the standard library (a
// value with a line break is cleaned there, never sent as it is).
func TestWriteRequestMatchesStandardLibrary(t *testing.T) {
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		name  string
		lean  bool
		build func() *http.Request
	}{
		{"stream call", true, func() *http.Request {
			r := newReq(t, http.MethodPost, "http://127.0.0.1:9090/v1/chat/completions", body)
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "text/event-stream")
			r.Header.Set("User-Agent", "breakwater/1.0")
			r.Header.Set("Authorization", "Bearer sk-test")
			r.Header.Set("X-Custom", "")
			r.Header["Anthropic-Beta"] = []string{"a", "b"}
			return r
		}},
		{"query and no user agent", true, func() *http.Request {
			r := newReq(t, http.MethodPost, "http://example.com/v1/messages?beta=true&x=%2F", body)
			r.Header.Set("X-Api-Key", "k")
			return r
		}},
		{"host override, ipv6", true, func() *http.Request {
			r := newReq(t, http.MethodPost, "http://[::1]:8080/v1/responses", body)
			r.Host = "api.example.com"
			return r
		}},
		{"post without body", true, func() *http.Request {
			return newReq(t, http.MethodPost, "http://127.0.0.1/v1/x", "")
		}},
		{"get without body", true, func() *http.Request {
			return newReq(t, http.MethodGet, "http://127.0.0.1/v1/models", "")
		}},
		{"line break in a value", false, func() *http.Request {
			r := newReq(t, http.MethodPost, "http://127.0.0.1/v1/x", body)
			r.Header.Set("X-Evil", "a\r\nInjected: yes")
			return r
		}},
		{"blank around a value", false, func() *http.Request {
			r := newReq(t, http.MethodPost, "http://127.0.0.1/v1/x", body)
			r.Header["X-Pad"] = []string{" v "}
			return r
		}},
		{"empty user agent", false, func() *http.Request {
			r := newReq(t, http.MethodPost, "http://127.0.0.1/v1/x", body)
			r.Header["User-Agent"] = []string{""}
			return r
		}},
		{"connection close", false, func() *http.Request {
			r := newReq(t, http.MethodPost, "http://127.0.0.1/v1/x", body)
			r.Close = true
			return r
		}},
		{"body of unknown length", false, func() *http.Request {
			r := newReq(t, http.MethodPost, "http://127.0.0.1/v1/x", "")
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), 0
			return r
		}},
		{"host with a zone", false, func() *http.Request {
			return newReq(t, http.MethodPost, "http://[fe80::1%25eth0]:80/v1/x", body)
		}},
		{"name that is not a token", false, func() *http.Request {
			r := newReq(t, http.MethodPost, "http://127.0.0.1/v1/x", body)
			r.Header["Bad Name"] = []string{"v"}
			return r
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.build()
			if _, lean := leanRequest(req); lean != tc.lean {
				t.Fatalf("leanRequest = %v, want %v", lean, tc.lean)
			}
			var got, want bytes.Buffer
			w := bufio.NewWriterSize(&got, writeBufferSize)
			if err := writeRequest(w, req); err != nil {
				t.Fatalf("writeRequest: %v", err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := tc.build().Write(&want); err != nil {
				t.Fatalf("Request.Write: %v", err)
			}
			if got.String() != want.String() {
				t.Fatalf("writeRequest wrote\n%q\nRequest.Write writes\n%q", got.String(), want.String())
			}
		})
	}
}

// TestWriteRequestShortBody: a body shorter than its Content-Length is an
// error, as in the standard library, not a request cut short in silence.
func TestWriteRequestShortBody(t *testing.T) {
	req := newReq(t, http.MethodPost, "http://127.0.0.1/v1/x", "abc")
	req.ContentLength = 10
	err := writeRequest(bufio.NewWriter(io.Discard), req)
	if err == nil {
		t.Fatal("a body 7 bytes short was written without an error")
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, http.ErrContentLength) {
		t.Fatalf("error = %v, want the body's end or http.ErrContentLength", err)
	}
}

// newReq is a request with body (none when empty).
func newReq(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
