package server

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// successResult is a non-streaming success as the proxy answers it: the
// route headers, then the upstream's Content-Type and request id.
func successResult() *proxy.Result {
	return &proxy.Result{Status: 200, Body: []byte(`{"choices":[]}`), Header: []wire.Header{
		{Name: "X-Breakwater-Provider", Value: "alpha"},
		{Name: "X-Breakwater-Connection", Value: "alpha-key-1"},
		{Name: "X-Breakwater-Model", Value: "m1"},
		{Name: "X-Breakwater-Attempts", Value: "1"},
		{Name: "Content-Type", Value: "application/json"},
		{Name: "X-Request-Id", Value: "req_up_1"},
	}}
}

// BenchmarkRender is the server's answer of a non-streaming success:
// the request id header, then render.
func BenchmarkRender(b *testing.B) {
	s := &Server{}
	res := successResult()
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		setHeader(&ctx.Response.Header, "X-Request-Id", "0badf00d-1a2b")
		s.render(&ctx, res)
	}
}

// BenchmarkAuthOpen is authClient on a keyless (loopback-only) gateway
// for an accepted request, whose URI is not parsed yet (as a request
// fresh off the connection).
func BenchmarkAuthOpen(b *testing.B) {
	s := &Server{cfg: &config.Config{}, auth: &authenticator{}}
	s.cfg.Server.Listen = "127.0.0.1:8080"
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(fasthttp.MethodPost)
	ctx.Request.Header.SetHost("127.0.0.1:8080")
	ctx.Request.Header.SetRequestURI("/v1/chat/completions")
	ctx.Request.Header.SetContentType("application/json")
	ctx.Request.Header.Set("User-Agent", "bench")
	b.ReportAllocs()
	for b.Loop() {
		ctx.Request.SetRequestURI("/v1/chat/completions")
		if !s.authClient(&ctx, wire.FormatChat) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkBudgetCycle is a request's body budget bookkeeping: reserved
// at its headers, claimed by its handler chain, released at its end.
func BenchmarkBudgetCycle(b *testing.B) {
	bb := newBodyBudget(64<<20, 1<<20, time.Minute, func() time.Duration { return time.Second }, nil)
	h := header(80, "")
	b.ReportAllocs()
	for b.Loop() {
		bb.headerReceived(h)
		if bb.claim(h) {
			b.Fatal("refused")
		}
		bb.release(h)
	}
}

// BenchmarkBudgetCycleParallel is BenchmarkBudgetCycle from every core at
// once, each goroutine with its own request header (connection).
func BenchmarkBudgetCycleParallel(b *testing.B) {
	bb := newBodyBudget(64<<20, 1<<20, time.Minute, func() time.Duration { return time.Second }, nil)
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		h := header(80, "")
		for pb.Next() {
			bb.headerReceived(h)
			if bb.claim(h) {
				b.Error("refused")
				return
			}
			bb.release(h)
		}
	})
}
