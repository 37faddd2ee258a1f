package upstream

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/cputime"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// BenchmarkDoBuffered makes buffered calls one after the other, to a
// Target literal and to a kept one, with the headers the gateway sends to
// an OpenAI-kind upstream, to a fasthttp
// server over loopback that answers a small chat completion with the
// headers such an upstream sends. Besides ns/op (mostly the loopback's
// round trips) it reports cpu-ns/op, the process's CPU time per call: the
// client's cost plus the server's, the same on both sides of a
// comparison.
func BenchmarkDoBuffered(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","model":"m1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.SetContentType("application/json")
		ctx.Response.Header.Set("X-Request-Id", "req_up_1")
		ctx.Response.Header.Set("Openai-Processing-Ms", "12")
		ctx.Response.Header.Set("X-Ratelimit-Limit-Requests", "500")
		ctx.Response.Header.Set("X-Ratelimit-Remaining-Requests", "499")
		ctx.Response.SetBodyRaw(answer)
	}, NoDefaultServerHeader: true}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	p := NewPool(Timeouts{})
	b.Cleanup(p.Close)
	h := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"breakwater/bench"}, "Accept": {"application/json"},
		"Authorization": {"Bearer sk-bench"}}
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"
	body := []byte(`{"model":"m1","messages":[{"role":"user","content":"hello there"}]}`)
	for _, path := range paths[2:] {
		b.Run(path, func(b *testing.B) {
			tg := bufferedTarget(path, url, h)
			call := func() {
				r, err := p.DoBuffered(tg, wire.Owned(body), Route{}, 10*time.Second)
				if err != nil || r.Status != 200 || len(r.Body) != len(answer) || r.Get("X-Request-Id") != "req_up_1" {
					b.Fatalf("call: %v %d %s", err, r.Status, r.Body)
				}
			}
			call()
			cputime.Loop(b, call)
		})
	}
}

// cannedTransport is a host client's round trip without a connection: the
// request is written to nowhere and the answer read from answer, so a
// benchmark measures the client's own work, without the network's.
type cannedTransport struct {
	answer           []byte
	writers, readers sync.Pool
}

// RoundTrip implements fasthttp.RoundTripper.
func (c *cannedTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	w, _ := c.writers.Get().(*bufio.Writer)
	if w == nil {
		w = bufio.NewWriter(io.Discard)
	}
	defer c.writers.Put(w)
	if err := req.Write(w); err != nil {
		return false, err
	}
	if err := w.Flush(); err != nil {
		return false, err
	}
	r, _ := c.readers.Get().(*bufio.Reader)
	if r == nil {
		r = bufio.NewReader(nil)
	}
	defer c.readers.Put(r)
	r.Reset(bytes.NewReader(c.answer))
	return false, resp.ReadLimitBody(r, hc.MaxResponseBodySize)
}

// BenchmarkDoBufferedCanned is BenchmarkDoBuffered without the network:
// the request is written to nowhere and the mock's answer to a chat
// completion read from memory (cannedTransport), so ns/op is the client's
// own CPU time per call.
func BenchmarkDoBufferedCanned(b *testing.B) {
	body := `{"id":"chatcmpl-aqd0mg39e13wu1oi","object":"chat.completion","created":1796158638,"model":"m1","system_fingerprint":"fp_mock","choices":[{"index":0,"message":{"role":"assistant","content":"echo: hello there","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":15,"completion_tokens":4,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`
	answer := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nContent-Type: application/json\r\nDate: Wed, 02 Dec 2026 10:00:00 GMT\r\n\r\n" + body
	p := NewPool(Timeouts{})
	p.fastTransport = &cannedTransport{answer: []byte(answer)}
	b.Cleanup(p.Close)
	h := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"breakwater/bench"}, "Accept": {"application/json"},
		"Authorization": {"Bearer sk-bench"}}
	url := "http://127.0.0.1:9/v1/chat/completions"
	req := []byte(`{"model":"m1","messages":[{"role":"user","content":"hello there"}]}`)
	for _, path := range paths[2:] {
		b.Run(path, func(b *testing.B) {
			tg := bufferedTarget(path, url, h)
			b.ReportAllocs()
			for b.Loop() {
				r, err := p.DoBuffered(tg, wire.Owned(req), Route{}, 10*time.Second)
				if err != nil || r.Status != 200 || len(r.Body) != len(body) {
					b.Fatalf("call: %v %d %s", err, r.Status, r.Body)
				}
			}
		})
	}
}
