package upstream

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// seen is a request as the upstream read it.
type seen struct {
	method, uri, host string
	header            http.Header
	length            int64
	body              string
}

// String shows a request seen without its body, only the body's length.
func (s seen) String() string {
	return fmt.Sprintf("%s %s Host %s %v (Content-Length %d, body of %d bytes)", s.method, s.uri, s.host, s.header, s.length, len(s.body))
}

// A kept Target (NewTarget) sends what the same Target literal sends —
// method, path and query, Host, every header with every value, the
// body's Content-Length and bytes — on every call, its reused requests
// keeping nothing of the call before: bodies of one piece, small spliced
// ones (copied) and large ones (streamed from their pieces) in turn.
func TestKeptTargetSendsWhatALiteralSends(t *testing.T) {
	var mu sync.Mutex
	var last seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		last = seen{method: r.Method, uri: r.RequestURI, host: r.Host, header: r.Header.Clone(), length: r.ContentLength, body: string(b)}
		mu.Unlock()
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	p := NewPool(Timeouts{})
	defer p.Close()
	h := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"breakwater/test"}, "Accept": {"application/json"},
		"Authorization": {"Bearer sk-1"}, "Anthropic-Beta": {"a", "b"}}
	url := srv.URL + "/v1/messages?beta=true"
	kept := NewTarget(http.MethodPost, url, h)
	send := func(tg Target, body wire.Splice) seen {
		t.Helper()
		if _, err := p.DoBuffered(tg, body, Route{}, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return last
	}
	for i, size := range []int{10, 200, 300, 10, copiedBody + 10, 3 << 20, 10, 200, 0} {
		raw := []byte(`{"model":"p/m","messages":[{"role":"user","content":"` + strings.Repeat("y", size) + `"}]}`)
		r, err := wire.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		body := r.SpliceModel(raw, "m")
		if i%3 == 0 {
			body = wire.Owned(raw)
		}
		want := send(Target{Method: http.MethodPost, URL: url, Header: h}, body)
		got := send(kept, body)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("call %d: kept Target sent %s, the literal %s", i, got, want)
		}
		if want.uri != "/v1/messages?beta=true" || len(want.header["Anthropic-Beta"]) != 2 || want.length != int64(len(want.body)) {
			t.Fatalf("call %d: the literal sent %s", i, want)
		}
	}
	if kept.laid.dest == nil || kept.laid.err != nil {
		t.Fatal("the kept Target was not laid out once")
	}
}

// A kept Target fails as the same Target literal fails, with the same
// error: a route that cannot be built (before its headers are checked), a
// header that cannot be sent, a scheme the client does not speak, a URL
// that does not parse; the route's error comes first.
func TestKeptTargetFailsAsALiteral(t *testing.T) {
	p := NewPool(Timeouts{Connect: time.Second})
	defer p.Close()
	bad := Route{LocalAddress: "not-an-ip"}
	for _, tc := range []struct {
		name, url string
		h         http.Header
		r         Route
		local     bool
	}{
		{"route", "http://127.0.0.1:9/v1/chat/completions", nil, bad, true},
		{"route before header", "http://127.0.0.1:9/v1/chat/completions", http.Header{"Bad Name": {"v"}}, bad, true},
		{"header", "http://127.0.0.1:9/v1/chat/completions", http.Header{"X-Ok": {"a\nb"}}, Route{}, true},
		{"scheme", "ftp://127.0.0.1:9/v1/chat/completions", nil, Route{}, false},
		{"header before scheme", "ftp://127.0.0.1:9/v1/chat/completions", http.Header{"Bad Name": {"v"}}, Route{}, true},
		{"route before scheme", "ftp://127.0.0.1:9/v1/chat/completions", nil, bad, true},
		{"URL", "http://bad\x01host/v1", nil, Route{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lit := Target{Method: http.MethodPost, URL: tc.url, Header: tc.h}
			_, want := p.DoBuffered(lit, wire.Owned([]byte(`{}`)), tc.r, time.Second)
			if want == nil || IsLocal(want) != tc.local {
				t.Fatalf("literal: err %v, want a local error: %v", want, tc.local)
			}
			kept := NewTarget(http.MethodPost, tc.url, tc.h)
			for range 2 {
				if _, err := p.DoBuffered(kept, wire.Owned([]byte(`{}`)), tc.r, time.Second); err == nil || err.Error() != want.Error() || IsLocal(err) != tc.local {
					t.Fatalf("kept: err %v, want %v", err, want)
				}
			}
		})
	}
}

// A buffered answer's body and its headers share one allocation: the
// body may be written and appended to without changing a header, and
// a body that is empty is nil, as a copy of it was.
func TestBufferedBodyLeavesTheHeadersAlone(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_1")
		if r.URL.Path == "/empty" {
			w.WriteHeader(204)
			return
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	p := NewPool(Timeouts{})
	defer p.Close()
	b, err := p.DoBuffered(NewTarget(http.MethodPost, srv.URL+"/v1", nil), wire.Owned([]byte(`{}`)), Route{}, 5*time.Second)
	if err != nil || string(b.Body) != `{"ok":true}` {
		t.Fatalf("answer %q, err %v", b.Body, err)
	}
	before := fmt.Sprint(b.Fields)
	for i := range b.Body {
		b.Body[i] = 'x'
	}
	b.Body = append(b.Body, strings.Repeat("y", 64)...)
	if after := fmt.Sprint(b.Fields); after != before || b.Get("X-Request-Id") != "req_1" {
		t.Fatalf("writing the body changed the headers: %s, then %s", before, after)
	}
	e, err := p.DoBuffered(NewTarget(http.MethodPost, srv.URL+"/empty", nil), wire.Owned([]byte(`{}`)), Route{}, 5*time.Second)
	if err != nil || e.Status != 204 || e.Body != nil || e.Get("X-Request-Id") != "req_1" {
		t.Fatalf("empty answer: %d %#v %v, err %v", e.Status, e.Body, e.Fields, err)
	}
}
