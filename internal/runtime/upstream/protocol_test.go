package upstream

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// both runs a POST through each client path of the pool (Do on a direct
// route, Do through a forward proxy, DoBuffered to a Target literal and to
// a kept one) and hands back status,
// headers, body and error.
func both(t *testing.T, url string, h http.Header, body string, f func(t *testing.T, status int, hdr http.Header, body []byte, err error)) {
	t.Helper()
	p := NewPool(Timeouts{})
	p.maxBody = 1 << 20
	t.Cleanup(p.Close)
	for _, path := range paths[:2] {
		t.Run(path, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			for k, vs := range h {
				req.Header[k] = vs
			}
			resp, err := p.Do(req, routeOf(t, path), Limits{})
			if err != nil {
				f(t, 0, nil, nil, err)
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			f(t, resp.StatusCode, resp.Header, b, err)
		})
	}
	for _, path := range paths[2:] {
		t.Run(path, func(t *testing.T) {
			b, err := p.DoBuffered(bufferedTarget(path, url, h), wire.Owned([]byte(body)), Route{}, 10*time.Second)
			if err != nil {
				f(t, 0, nil, nil, err)
				return
			}
			f(t, b.Status, b.Header(), b.Body, nil)
		})
	}
}

// TestRedirectsAreNeverFollowed replays issue 19 item 3: the streaming
// client followed 301/302/307/308 to another host, sending the Anthropic
// x-api-key (and, on 307/308, the prompt again) and relaying the foreign
// answer as 200. No client path may call the second host; the 3xx is the
// answer.
func TestRedirectsAreNeverFollowed(t *testing.T) {
	var calls atomic.Int32
	var leaked atomic.Value
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		leaked.Store(r.Header.Get("x-api-key") + r.Header.Get("Authorization"))
		_, _ = io.WriteString(w, `{"id":"foreign","choices":[{"message":{"content":"not the provider"}}]}`)
	}))
	defer foreign.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			http.Redirect(w, r, foreign.URL+"/v1/messages", code)
			_, _ = w.Write(bytes.Repeat([]byte("x"), 2*MaxRedirectBody))
		}))
		h := http.Header{}
		h.Set("x-api-key", "sk-ant-api03-secret")
		h.Set("Content-Type", "application/json")
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			both(t, provider.URL+"/v1/messages", h, `{"model":"m","messages":[{"role":"user","content":"prompt"}]}`,
				func(t *testing.T, status int, hdr http.Header, body []byte, err error) {
					if err != nil {
						t.Fatal(err)
					}
					if status != code || !strings.HasPrefix(hdr.Get("Location"), foreign.URL) {
						t.Fatalf("status %d, Location %q: want the %d itself", status, hdr.Get("Location"), code)
					}
					if len(body) > MaxRedirectBody {
						t.Fatalf("redirect body of %d bytes, want at most %d", len(body), MaxRedirectBody)
					}
				})
		})
		provider.Close()
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the redirect target was called %d times (credentials seen: %q)", n, leaked.Load())
	}
	// The caller classifies the 3xx as the provider's failure: failed
	// over, the connection backs off, the breaker is not tripped.
	o := engine.DefaultClassifier{}.Classify(engine.ErrorInput{Provider: "p", Status: 307})
	if o.Reason != engine.ReasonServerError || o.Scope != engine.ScopeConnection || !o.Retryable || engine.TripsBreaker(o) {
		t.Fatalf("307 classified %+v", o)
	}
}

// bigHeaders answers 200 with n bytes of extra headers.
func bigHeaders(n int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i, left := 0, n; left > 0; i++ {
			v := strings.Repeat("v", min(left, 1000))
			w.Header().Set("X-Filler-"+strconv.Itoa(i), v)
			left -= len(v) + 14
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
}

// TestResponseHeadersOver4KB replays issue 19 item 10: a non-stream answer
// with more than 4 KB of headers failed as a network error that counted
// against the breaker. Up to MaxResponseHeaderBytes it is read; beyond,
// both clients fail with a ProtocolError that the default classification
// does not count against the breaker.
func TestResponseHeadersOver4KB(t *testing.T) {
	ok := httptest.NewServer(bigHeaders(8 << 10))
	defer ok.Close()
	both(t, ok.URL, nil, "{}", func(t *testing.T, status int, hdr http.Header, body []byte, err error) {
		if err != nil || status != 200 || string(body) != `{"ok":true}` {
			t.Fatalf("8 KB of headers: status %d body %q err %v", status, body, err)
		}
	})
	huge := httptest.NewServer(bigHeaders(MaxResponseHeaderBytes + 4096))
	defer huge.Close()
	both(t, huge.URL, nil, "{}", func(t *testing.T, status int, hdr http.Header, body []byte, err error) {
		if !errors.Is(err, ErrHeaderTooLarge) || !IsProtocolError(err) {
			t.Fatalf("want a ProtocolError wrapping ErrHeaderTooLarge, got %v", err)
		}
		if strings.Contains(err.Error(), "vvvv") {
			t.Fatalf("the error quotes upstream bytes: %v", err)
		}
		o := engine.DefaultClassifier{}.Classify(engine.ErrorInput{Provider: "p", TransportErr: err})
		if o.Transport || engine.TripsBreaker(o) || o.Reason != engine.ReasonServerError || o.Scope != engine.ScopeConnection || !o.Retryable {
			t.Fatalf("classified %+v: want a retryable server_error of the connection, not a transport failure", o)
		}
	})
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = io.WriteString(zw, s)
	_ = zw.Close()
	return b.Bytes()
}

// TestUnsolicitedCompressedBodies (the pool's body bound lowered to 1 MiB
// for the gzip bomb) replays issue 19 item 10: an upstream
// that gzips its answer unasked had its Content-Encoding stripped and the
// compressed bytes relayed as plain JSON. Both clients decode gzip and
// deflate (and drop the header), refuse what they cannot decode, and bound
// the decoded size.
func TestUnsolicitedCompressedBodies(t *testing.T) {
	const answer = `{"id":"chatcmpl-1","choices":[{"message":{"role":"assistant","content":"hello"}}]}`
	serve := func(coding string, body []byte) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", coding)
			_, _ = w.Write(body)
		}))
	}
	plain := func(t *testing.T, status int, hdr http.Header, body []byte, err error) {
		if err != nil || status != 200 || string(body) != answer {
			t.Fatalf("status %d body %q err %v", status, body, err)
		}
		if hdr.Get("Content-Encoding") != "" || hdr.Get("Content-Length") != "" {
			t.Fatalf("headers still describe the compressed body: %v", hdr)
		}
	}
	for _, coding := range []string{"gzip", "x-gzip", "GZIP"} {
		srv := serve(coding, gzipped(answer))
		t.Run(coding, func(t *testing.T) { both(t, srv.URL, nil, "{}", plain) })
		srv.Close()
	}
	var raw, zl bytes.Buffer
	fw, _ := flateWriter(&raw)
	_, _ = io.WriteString(fw, answer)
	_ = fw.Close()
	zw := zlibWriter(&zl)
	_, _ = io.WriteString(zw, answer)
	_ = zw.Close()
	for name, body := range map[string][]byte{"deflate-zlib": zl.Bytes(), "deflate-raw": raw.Bytes()} {
		srv := serve("deflate", body)
		t.Run(name, func(t *testing.T) { both(t, srv.URL, nil, "{}", plain) })
		srv.Close()
	}
	for name, tc := range map[string]struct {
		coding string
		body   []byte
		want   error
	}{
		"brotli":        {"br", []byte("\x1b\x00"), ErrContentEncoding},
		"stacked":       {"gzip, gzip", gzipped(string(gzipped(answer))), ErrContentEncoding},
		"corrupt gzip":  {"gzip", []byte("\x1f\x8b\x08\x00garbage-garbage-garbage"), ErrContentEncoding},
		"not gzip":      {"gzip", []byte(answer), ErrContentEncoding},
		"gzip bomb":     {"gzip", gzipped(strings.Repeat("0", 1<<20+1)), ErrBodyTooLarge},
		"junk encoding": {"x-compress<script>", []byte(answer), ErrContentEncoding},
	} {
		srv := serve(tc.coding, tc.body)
		t.Run(name, func(t *testing.T) {
			both(t, srv.URL, nil, "{}", func(t *testing.T, status int, hdr http.Header, body []byte, err error) {
				if !errors.Is(err, tc.want) || !IsProtocolError(err) {
					t.Fatalf("want a ProtocolError wrapping %v, got status %d, %d bytes, err %v", tc.want, status, len(body), err)
				}
				if strings.Contains(err.Error(), "<") {
					t.Fatalf("the error quotes the upstream header: %q", err)
				}
			})
		})
		srv.Close()
	}
}

func flateWriter(w io.Writer) (io.WriteCloser, error) {
	return flate.NewWriter(w, flate.DefaultCompression)
}

func zlibWriter(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) }

// TestErrorsDoNotQuoteTheURL: a transport error of the streaming client
// does not carry the request URL, which may hold a key in its query.
func TestErrorsDoNotQuoteTheURL(t *testing.T) {
	p := NewPool(Timeouts{Connect: time.Second})
	defer p.Close()
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/v1/models?key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", nil)
	_, err := p.Do(req, Route{}, Limits{})
	if err == nil || strings.Contains(err.Error(), "AIza") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v", err)
	}
}

// TestCheckJSONBody: a 2xx body must be a JSON object.
func TestCheckJSONBody(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"id":"chatcmpl-1","choices":[]}`, true},
		{" \n{\"a\":1}\n", true},
		{`<html><body>502 Bad Gateway</body></html>`, false},
		{`{"id": "chatcmpl-1", "choices": [`, false},
		{`{"id": "chatcmpl-1", "choices": [}`, false},
		{`[1,2]`, false},
		{``, false},
	} {
		err := CheckJSONBody([]byte(c.body))
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrMalformedBody) || err != nil && !IsProtocolError(err) {
			t.Errorf("CheckJSONBody(%q) = %v", c.body, err)
		}
	}
}

func TestCheckEventStream(t *testing.T) {
	for ct, ok := range map[string]bool{"": true, "text/event-stream": true, "Text/Event-Stream; charset=utf-8": true,
		"application/json": false, "text/html; charset=utf-8": false} {
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		if err := CheckEventStream(h); (err == nil) != ok || err != nil && !errors.Is(err, ErrNotEventStream) {
			t.Errorf("CheckEventStream(%q) = %v", ct, err)
		}
	}
}

// BenchmarkCheckJSONBody is the success-path cost of validating a typical
// non-streaming chat answer (the mock's, 463 bytes).
func BenchmarkCheckJSONBody(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-aqd0mg39e13wu1oi","object":"chat.completion","created":1796158638,"model":"m1","system_fingerprint":"fp_mock","choices":[{"index":0,"message":{"role":"assistant","content":"echo: hello there","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":15,"completion_tokens":4,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := CheckJSONBody(body); err != nil {
			b.Fatal(err)
		}
	}
}
