package proxy_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/cputime"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// maxBufferedAllocs bounds the allocations of one non-streaming request
// answered on its first attempt (TestBufferedPathAllocations), with the
// upstream headers and URL shared per connection, the answer's headers
// read where they lie, the answer and the attempt's timers on the stack
// and the request state, its admission ticket included, reused: what is
// left is the quoted upstream model spliced into the body, the answer's
// body with its headers' bytes, and the list of its headers.
const maxBufferedAllocs = 3

// bufferedAnswer is the upstream's answer of the buffered path's test and
// benchmark.
var bufferedAnswer = []byte(`{"id":"chatcmpl-1","object":"chat.completion","model":"m1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)

// bufferedLoop is a loop whose proxy calls, with the gateway's own
// upstream client, a fasthttp server over loopback that answers
// bufferedAnswer (401 without alpha's credential). It returns the loop and
// one request to alpha/m1, and a function that serves it once and checks
// the answer, relayed upstream headers included.
func bufferedLoop(tb testing.TB) (*loop, func()) {
	tb.Helper()
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if !strings.HasPrefix(string(ctx.Request.Header.Peek("Authorization")), "Bearer sk-a") {
			ctx.SetStatusCode(401)
			return
		}
		ctx.Response.Header.SetContentType("application/json")
		ctx.Response.Header.Set("X-Request-Id", "req_up_1")
		ctx.Response.Header.Set("Openai-Processing-Ms", "12")
		ctx.Response.Header.Set("X-Ratelimit-Limit-Requests", "500")
		ctx.Response.SetBodyRaw(bufferedAnswer)
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Shutdown() })
	cfg := strings.Replace(loopConfig, "http://upstream.test/v1", "http://"+ln.Addr().String()+"/v1", 1)
	pool := upstream.NewPool(upstream.Timeouts{})
	tb.Cleanup(pool.Close)
	l := newLoop(tb, cfg, "", func(s *setup) { s.proxy.Upstream = pool })
	req := l.request(wire.FormatChat, chat("alpha/m1", ""))
	req.Start = epoch // a request's arrival, stamped by the server
	serve := func() {
		res := l.p.Serve(context.Background(), req)
		if res.Status != 200 || res.HeaderValue("X-Request-Id") != "req_up_1" || res.HeaderValue("Openai-Processing-Ms") != "12" ||
			res.HeaderValue("X-Breakwater-Provider") != "alpha" || string(res.Body) != string(bufferedAnswer) {
			tb.Fatalf("answer %d %v %s", res.Status, res.Header, res.Body)
		}
		l.p.Release(res)
	}
	return l, serve
}

// A non-streaming request answered 2xx on its first attempt, through the
// gateway's buffered client to a real upstream over loopback, allocates
// at most maxBufferedAllocs times, the upstream's own serving included
// (fasthttp's server allocates nothing per request), and its answer
// carries the relayed upstream headers.
func TestBufferedPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts do not hold under -race")
	}
	_, serve := bufferedLoop(t)
	serve() // the client's connection, the routing's headers
	if n := testing.AllocsPerRun(200, serve); n > maxBufferedAllocs {
		t.Fatalf("%v allocations per request, want at most %d", n, maxBufferedAllocs)
	}
}

// BenchmarkServeBuffered serves non-streaming requests one after the
// other through Proxy.Serve and the gateway's buffered upstream client to
// a fasthttp server over loopback (TestBufferedPathAllocations' setup).
// Besides ns/op (mostly the loopback's round trips) it reports cpu-ns/op,
// the process's CPU time (user and system) per request: the proxy's cost
// plus the upstream server's, which is the same on both sides of a
// comparison.
func BenchmarkServeBuffered(b *testing.B) {
	_, serve := bufferedLoop(b)
	serve()
	cputime.Loop(b, serve)
}
