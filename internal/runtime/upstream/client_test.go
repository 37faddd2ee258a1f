package upstream

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
	"github.com/valyala/fasthttp"
)

func TestLocalAddressBindsTheOutgoingSocket(t *testing.T) {
	var remote string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		remote = r.RemoteAddr
	}))
	defer srv.Close()
	p := NewPool(Timeouts{})
	defer p.Close()
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := p.Do(req, Route{LocalAddress: ip}, Limits{})
		if err != nil {
			t.Fatalf("bind %s: %v", ip, err)
		}
		resp.Body.Close()
		if host, _, _ := net.SplitHostPort(remote); host != ip {
			t.Fatalf("upstream saw %s, want the bound %s", remote, ip)
		}
	}
	if _, err := p.Client(Route{LocalAddress: "not-an-ip"}); err == nil {
		t.Fatal("an invalid local_address must be refused")
	}
}

func TestProxyURLRoutesThroughTheProxy(t *testing.T) {
	var proxied string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied = r.URL.String() // absolute-form request target
		_, _ = io.WriteString(w, "via proxy")
	}))
	defer proxy.Close()
	p := NewPool(Timeouts{})
	req, _ := http.NewRequest(http.MethodGet, "http://upstream.invalid/v1/models", nil)
	resp, err := p.Do(req, Route{ProxyURL: proxy.URL}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "via proxy" || proxied != "http://upstream.invalid/v1/models" {
		t.Fatalf("proxy saw %q, body %q", proxied, b)
	}
	_, err = p.Client(Route{ProxyURL: "http://user:hunter2@[::1"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("bad proxy_url must fail without echoing it: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	got := NewPool(Timeouts{Connect: time.Second}).Timeouts()
	if got.Connect != time.Second || got.FirstByte != 10*time.Minute || got.Idle != 60*time.Second {
		t.Fatalf("timeouts %+v", got)
	}
}

func TestDoBufferedReadsTheWholeAnswerFromTheBoundAddress(t *testing.T) {
	var remote, auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		remote, auth = r.RemoteAddr, r.Header.Get("Authorization")
		w.Header().Set("X-Ratelimit-Remaining-Requests", "7")
		w.WriteHeader(429)
		_, _ = io.WriteString(w, `{"error":"slow down"}`)
	}))
	defer srv.Close()
	p := NewPool(Timeouts{})
	defer p.Close()
	if !p.Buffers(Route{LocalAddress: "127.0.0.4"}) || p.Buffers(Route{ProxyURL: "http://127.0.0.1:1"}) {
		t.Fatal("Buffers: direct routes use the synchronous client, proxied ones do not")
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer k")
	url := srv.URL + "/v1/chat/completions"
	// A kept Target sent on one route, then another, then the first again
	// goes out from each route's address.
	for _, path := range paths[2:] {
		for _, local := range []string{"127.0.0.4", "127.0.0.5", "127.0.0.4"} {
			b, err := p.DoBuffered(bufferedTarget(path, url, h), wire.Owned([]byte(`{}`)), Route{LocalAddress: local}, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if host, _, _ := net.SplitHostPort(remote); host != local || auth != "Bearer k" {
				t.Fatalf("%s: upstream saw %s with %q, want %s", path, remote, auth, local)
			}
			if b.Status != 429 || string(b.Body) != `{"error":"slow down"}` || b.Get("X-Ratelimit-Remaining-Requests") != "7" {
				t.Fatalf("%s: answer %d %q %v", path, b.Status, b.Body, b.Fields)
			}
		}
	}
}

// TestFieldsOf: the answer's headers copied from fasthttp are what
// http.Header.Add of each would give: canonical names, every value of a
// repeated header in order, and values that stay put when another header
// is added later; Get reads the first value of a name.
func TestFieldsOf(t *testing.T) {
	var rh fasthttp.ResponseHeader
	rh.Set("content-type", "application/json")
	rh.Add("X-Ratelimit-Remaining-Requests", "41")
	rh.Add("set-cookie", "a=1")
	rh.Add("Set-Cookie", "b=2")
	rh.Add("x-empty", "")
	want := http.Header{}
	rh.VisitAll(func(k, v []byte) { want.Add(string(k), string(v)) })
	b := &Buffered{Fields: fieldsOf(&rh)}
	got := b.Header()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fieldsOf = %v, want %v", got, want)
	}
	if b.Get("Set-Cookie") != "a=1" || b.Get("X-Ratelimit-Remaining-Requests") != "41" || b.Get("X-Missing") != "" {
		t.Fatalf("Get: %v", b.Fields)
	}
	got.Add("Content-Type", "text/plain")
	if got.Get("X-Ratelimit-Remaining-Requests") != "41" || got.Values("Content-Type")[0] != "application/json" {
		t.Fatalf("adding a value changed another header: %v", got)
	}
}

// TestDoBufferedWritesASplicedBody: a client body with its model replaced
// reaches the upstream byte for byte with its Content-Length, whether it
// is copied into the request (small) or written from its pieces (large),
// and the client's body is left as it was; a kept Target's request,
// reused, carries each call's body whatever the one before it.
func TestDoBufferedWritesASplicedBody(t *testing.T) {
	var got []byte
	var length int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		length = r.ContentLength
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	p := NewPool(Timeouts{})
	defer p.Close()
	for _, path := range paths[2:] {
		tg := bufferedTarget(path, srv.URL+"/v1/chat/completions", nil)
		for _, size := range []int{100, copiedBody, copiedBody + 1, 3 << 20, 100} {
			body := []byte(`{"model":"prov/m","messages":[{"role":"user","content":"` + strings.Repeat("x", size) + `"}]}`)
			orig := string(body)
			r, err := wire.Parse(body)
			if err != nil {
				t.Fatal(err)
			}
			want := r.RewriteModel(body, "upstream-model")
			b, err := p.DoBuffered(tg, r.SpliceModel(body, "upstream-model"), Route{}, 5*time.Second)
			if err != nil || b.Status != 200 {
				t.Fatalf("%s, size %d: %v %+v", path, size, err, b)
			}
			if !bytes.Equal(got, want) || length != int64(len(want)) {
				t.Fatalf("%s, size %d: upstream read %d bytes (Content-Length %d), want %d", path, size, len(got), length, len(want))
			}
			if string(body) != orig {
				t.Fatalf("%s, size %d: the client's body changed", path, size)
			}
		}
	}
}

// An answer with more headers than fieldsOf notes on its stack is copied
// whole, in order.
func TestFieldsOfManyHeaders(t *testing.T) {
	var rh fasthttp.ResponseHeader
	for i := range 40 {
		rh.Add(fmt.Sprintf("X-H%02d", i), strings.Repeat("v", i))
	}
	fields := fieldsOf(&rh)
	var want []wire.Header
	rh.VisitAll(func(k, v []byte) { want = append(want, wire.Header{Name: string(k), Value: string(v)}) })
	if len(want) < 40 || !reflect.DeepEqual(fields, want) {
		t.Fatalf("fieldsOf = %v, want %v", fields, want)
	}
}

// DoBuffered refuses a header it cannot send — a name that is not a
// token, a value with a control byte — with a *LocalError, sending
// nothing.
func TestDoBufferedRefusesHeadersItCannotSend(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer srv.Close()
	p := NewPool(Timeouts{})
	defer p.Close()
	for _, path := range paths[2:] {
		for _, h := range []http.Header{{"Bad Name": {"v"}}, {"X-Ok": {"a\r\nInjected: 1"}}} {
			for range 2 {
				_, err := p.DoBuffered(bufferedTarget(path, srv.URL+"/v1/chat/completions", h), wire.Owned([]byte(`{}`)), Route{}, 5*time.Second)
				if !IsLocal(err) || err.Error() != CheckHeaders(h).Error() {
					t.Fatalf("%s, headers %q: err %v, want CheckHeaders' %v", path, h, err, CheckHeaders(h))
				}
			}
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the upstream got %d calls", n)
	}
}

// A buffered call's URL is parsed once and its parse reused: calls to the
// same URL, with and without a query, reach the upstream at their path and
// query; a URL that does not parse is not kept, and no more than
// maxParsedURLs are.
func TestDoBufferedReusesTheParsedURL(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Host + " " + r.URL.RequestURI())
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	p := NewPool(Timeouts{})
	defer p.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, path := range []string{"/v1/chat/completions", "/v1/chat/completions", "/v1/messages?beta=true", "/v1/messages?beta=true"} {
		if _, err := p.DoBuffered(Target{Method: http.MethodPost, URL: srv.URL + path}, wire.Owned([]byte(`{}`)), Route{}, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if g := got.Load(); g != host+" "+path {
			t.Fatalf("upstream saw %v, want %s %s", g, host, path)
		}
	}
	if n := p.urlCount.Load(); n != 2 {
		t.Fatalf("%d parsed URLs kept, want 2", n)
	}
	if p.parsedURL("http://bad\x01host/") != nil || p.urlCount.Load() != 2 {
		t.Fatal("a URL that does not parse was kept")
	}
	p.urlCount.Store(maxParsedURLs)
	if p.parsedURL(srv.URL+"/other") != nil || p.parsedURL(srv.URL+"/v1/chat/completions") == nil {
		t.Fatal("past maxParsedURLs a new URL must not be kept, a kept one still found")
	}
}
