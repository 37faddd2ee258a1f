package server

import (
	"bufio"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// header returns a request header with the given Content-Length (-1:
// chunked) and Content-Encoding ("" for none).
func header(n int, encoding string) *fasthttp.RequestHeader {
	h := &fasthttp.RequestHeader{}
	h.SetMethod("POST")
	h.SetContentLength(n)
	if encoding != "" {
		h.Set("Content-Encoding", encoding)
	}
	return h
}

func testBudget(limit int64, wait time.Duration) (*bodyBudget, chan struct{}) {
	done := make(chan struct{})
	return newBodyBudget(limit, 100, time.Second, func() time.Duration { return wait }, done), done
}

func TestBodyBudgetShares(t *testing.T) {
	b, _ := testBudget(1000, time.Millisecond)
	for _, c := range []struct {
		h    *fasthttp.RequestHeader
		want int64
	}{
		{header(40, ""), 40},
		{header(-1, ""), 100},          // chunked: the whole body limit
		{header(10, "gzip"), 100},      // compressed: its decoded size is bounded by the limit
		{header(0, ""), 0},             // no body
		{header(500, ""), 0},           // over the limit: refused unread by fasthttp (413)
		{&fasthttp.RequestHeader{}, 0}, // a GET
	} {
		if got := b.share(c.h); got != c.want {
			t.Errorf("share(%q) = %d, want %d", c.h.Header(), got, c.want)
		}
	}
}

// Requests that do not fit wait, in order, and are admitted as shares are
// released; one that waits past the queue budget is refused, and the
// refusal is reported once.
func TestBodyBudgetWaitsThenRefuses(t *testing.T) {
	b, _ := testBudget(100, 300*time.Millisecond)
	a, w1, w2 := header(60, ""), header(60, ""), header(30, "")
	if !b.reserve(a, 60) || b.inUse() != 60 {
		t.Fatalf("first reservation: in use %d", b.inUse())
	}
	var wg sync.WaitGroup
	got := make(chan string, 2)
	wg.Add(2)
	go func() { defer wg.Done(); b.reserve(w1, 60); got <- "w1" }()
	time.Sleep(20 * time.Millisecond)
	go func() { defer wg.Done(); b.reserve(w2, 30); got <- "w2" }() // fits, but queues behind w1
	time.Sleep(20 * time.Millisecond)
	select {
	case w := <-got:
		t.Fatalf("%s was admitted over the budget or ahead of the queue", w)
	default:
	}
	b.claim(a)
	b.release(a)
	wg.Wait()
	if first, second := <-got, <-got; first != "w1" && second != "w1" || b.inUse() != 90 {
		t.Fatalf("admitted %s then %s, in use %d", first, second, b.inUse())
	}
	// Now nothing fits 20 bytes: refused after 300 ms.
	r := header(20, "")
	t0 := time.Now()
	if b.reserve(r, 20) {
		t.Fatal("admitted over the budget")
	}
	if took := time.Since(t0); took < 250*time.Millisecond {
		t.Fatalf("refused after %v, want the 300 ms queue budget", took)
	}
	if !b.claim(r) || b.claim(r) {
		t.Fatal("the refusal must be reported once")
	}
	b.release(w1)
	b.release(w2)
	if b.inUse() != 0 || len(b.holds) != 0 {
		t.Fatalf("in use %d, holds %d after every release", b.inUse(), len(b.holds))
	}
}

// A share whose handler never ran (the body read failed and nobody
// released it) is freed by the next request on the same context, or by
// the sweep once the body's read deadline has long passed.
func TestBodyBudgetLeftoverShares(t *testing.T) {
	b, _ := testBudget(100, 50*time.Millisecond)
	var now time.Duration
	b.since = func() time.Duration { return now }
	lost := header(80, "")
	if !b.reserve(lost, 80) {
		t.Fatal("reserve")
	}
	// The same context's next request frees it first.
	if !b.reserve(lost, 10) || b.inUse() != 10 {
		t.Fatalf("in use %d, want the old share freed", b.inUse())
	}
	b.release(lost)
	// Another share nobody claims; the sweep keeps it through its read
	// window (the read timeout, 1 s here, and 5 s) and frees it after.
	if !b.reserve(header(85, ""), 85) {
		t.Fatal("reserve")
	}
	now += 6 * time.Second
	b.mu.Lock()
	swept := b.sweep()
	b.mu.Unlock()
	if swept || b.inUse() != 85 {
		t.Fatalf("a share swept within its read window: in use %d", b.inUse())
	}
	now += 2 * time.Minute
	x := header(50, "")
	if !b.reserve(x, 50) || b.inUse() != 50 {
		t.Fatalf("the expired share was not swept: in use %d", b.inUse())
	}
	// A claimed share never expires.
	owned := header(40, "")
	if !b.reserve(owned, 40) || b.claim(owned) {
		t.Fatal("reserve and claim")
	}
	now += time.Hour
	b.mu.Lock()
	b.sweep()
	_, kept := b.holds[owned]
	b.mu.Unlock()
	if !kept {
		t.Fatal("a share a handler holds was swept")
	}
}

// A waiting request gives up when the server shuts down.
func TestBodyBudgetShutdownEndsWaits(t *testing.T) {
	b, done := testBudget(10, time.Hour)
	b.reserve(header(10, ""), 10)
	res := make(chan bool, 1)
	go func() { res <- b.reserve(header(5, ""), 5) }()
	time.Sleep(20 * time.Millisecond)
	close(done)
	select {
	case ok := <-res:
		if ok {
			t.Fatal("admitted at shutdown")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the wait did not end at shutdown")
	}
}

// A compressed body's share is the whole max_request_bytes however the
// client spells the header's name, as fasthttp reads it off the wire.
func TestBodyBudgetShareOfACompressedBody(t *testing.T) {
	b, _ := testBudget(1000, time.Millisecond)
	for _, c := range []struct {
		raw  string
		want int64
	}{
		{"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\ncontent-encoding: gzip\r\nContent-Length: 10\r\n\r\n", 100},
		{"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nCONTENT-ENCODING: gzip\r\nContent-Length: 10\r\n\r\n", 100},
		{"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n", 10},
	} {
		var h fasthttp.RequestHeader
		if err := h.Read(bufio.NewReader(strings.NewReader(c.raw))); err != nil {
			t.Fatal(err)
		}
		if got := b.share(&h); got != c.want {
			t.Errorf("%q: share %d, want %d", c.raw, got, c.want)
		}
	}
}
