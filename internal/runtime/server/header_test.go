package server

import (
	"math/rand/v2"
	"testing"

	"github.com/valyala/fasthttp"
)

// setHeader stores what fasthttp's Set stores, for every name and value:
// the gateway's own, relayed ones, names in any case, special headers
// and values with line breaks or other control bytes.
func TestSetHeaderStoresWhatSetStores(t *testing.T) {
	names := []string{"X-Request-Id", "x-request-id", "X-REQUEST-ID", "Content-Type", "content-type", "X-Breakwater-Provider",
		"X-Breakwater-Attempts", "X-Ratelimit-Remaining-Requests", "x-ratelimit-remaining-requests", "Anthropic-Ratelimit-Tokens-Reset",
		"Retry-After", "Openai-Processing-Ms", "Request-Id", "Content-Length", "Connection", "Server", "Set-Cookie", "Date",
		"Transfer-Encoding", "Trailer", "-x", "-X", "X--y", "X--Y", "a", "A", "", "X_foo", "X-Foo Bar", "X-1a", "X-\xe9t\xc9",
		"X-Breakwater-Connection", "X-Breakwater-Model", "X-Breakwater-Warning"}
	for _, name := range names {
		if knownName(name) && !normalName(name) {
			t.Errorf("%q is a known name but not in normal form", name)
		}
	}
	values := []string{"", "v", "application/json", "close", "12", "a\r\nInjected: 1", "a\nb", "a\rb", "a\tb", "\x00\x01", "x=1; Path=/"}
	for _, name := range names {
		for _, value := range values {
			want, got := &fasthttp.ResponseHeader{}, &fasthttp.ResponseHeader{}
			want.Set("X-Before", "1")
			got.Set("X-Before", "1")
			want.Set(name, value)
			setHeader(got, name, value)
			if w, g := want.String(), got.String(); w != g {
				t.Errorf("name %q value %q:\nSet       %q\nsetHeader %q", name, value, w, g)
			}
		}
	}
	// Random names and values over the bytes that matter.
	const alphabet = "aZz-A_ 0\r\n\t~"
	rnd := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		b := make([]byte, rnd.IntN(8))
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 20000 {
		name, value := str(), str()
		want, got := &fasthttp.ResponseHeader{}, &fasthttp.ResponseHeader{}
		want.Set(name, value)
		setHeader(got, name, value)
		if w, g := want.String(), got.String(); w != g {
			t.Fatalf("name %q value %q:\nSet       %q\nsetHeader %q", name, value, w, g)
		}
	}
}

// A header set twice keeps its place and takes the later value, as Set
// does: the relayed upstream request id replaces the gateway's.
func TestSetHeaderReplaces(t *testing.T) {
	h := &fasthttp.ResponseHeader{}
	setHeader(h, "X-Request-Id", "gw-1")
	setHeader(h, "X-Breakwater-Provider", "alpha")
	setHeader(h, "X-Request-Id", "up-1")
	if got, want := string(h.Peek("X-Request-Id")), "up-1"; got != want {
		t.Fatalf("X-Request-Id %q, want %q", got, want)
	}
	var order []string
	h.VisitAll(func(k, _ []byte) { order = append(order, string(k)) })
	if len(order) < 2 || order[0] == "X-Breakwater-Provider" {
		t.Fatalf("order %q: the request id keeps its first place", order)
	}
}
