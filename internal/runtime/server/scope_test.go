package server

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
)

// connPair returns the two ends of a loopback TCP connection: the
// server's end (what fasthttp's handler has) and the client's.
func connPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// waitDone waits for ctx to end and returns its cause.
func waitDone(t *testing.T, ctx context.Context, within time.Duration) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(within):
		t.Fatalf("the context did not end within %v", within)
		return nil
	}
}

// A client that closes its connection while the request waits ends the
// request's context with proxy.ErrClientGone (after watchDelay).
func TestScopeNoticesTheClientLeaving(t *testing.T) {
	for _, how := range []string{"close", "half-close"} {
		srv, cli := connPair(t)
		sc := newScope(context.Background(), srv, time.Time{})
		time.Sleep(2 * watchDelay) // the watcher is parked on the connection
		if how == "close" {
			cli.Close()
		} else {
			_ = cli.(*net.TCPConn).CloseWrite()
		}
		if cause := waitDone(t, sc.ctx, time.Second); !errors.Is(cause, proxy.ErrClientGone) {
			t.Fatalf("%s: cause %v", how, cause)
		}
		sc.settle()
		sc.end()
	}
}

// Settling wakes the parked watcher, consumes none of the bytes a client
// pipelined, and leaves the connection readable with no deadline for the
// server's next read.
func TestScopeSettleLeavesTheConnectionAsItWas(t *testing.T) {
	srv, cli := connPair(t)
	sc := newScope(context.Background(), srv, time.Time{})
	time.Sleep(2 * watchDelay)
	sc.settle()
	if err := sc.ctx.Err(); err != nil {
		t.Fatalf("settling ended the context: %v", context.Cause(sc.ctx))
	}
	sc.end()

	// A pipelined request waiting in the socket: the client is there, the
	// bytes stay for the server.
	sc = newScope(context.Background(), srv, time.Time{})
	if _, err := cli.Write([]byte("GET /next HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * watchDelay)
	if sc.ctx.Err() != nil {
		t.Fatalf("pipelined bytes taken for a client that left: %v", context.Cause(sc.ctx))
	}
	sc.settle()
	sc.end()
	buf := make([]byte, 64)
	_ = srv.SetReadDeadline(time.Now().Add(time.Second))
	n, err := io.ReadAtLeast(srv, buf, 22)
	if err != nil || string(buf[:n]) != "GET /next HTTP/1.1\r\n\r\n" {
		t.Fatalf("the server read %q, %v", buf[:n], err)
	}
}

// The deadline ends the context with proxy.ErrRequestDeadline; once
// settled (an answer committed), it no longer does.
func TestScopeDeadline(t *testing.T) {
	sc := newScope(context.Background(), nil, time.Now().Add(30*time.Millisecond))
	if cause := waitDone(t, sc.ctx, time.Second); !errors.Is(cause, proxy.ErrRequestDeadline) {
		t.Fatalf("cause %v", cause)
	}
	sc.settle()
	sc.end()

	sc = newScope(context.Background(), nil, time.Now().Add(30*time.Millisecond))
	sc.settle()
	time.Sleep(60 * time.Millisecond)
	if sc.ctx.Err() != nil {
		t.Fatal("the deadline cut a settled request")
	}
	sc.end()
	if sc.ctx != nil {
		t.Fatal("end kept the context")
	}
}

// A request answered before watchDelay starts no watcher and, with its
// scope pooled, allocates only its context.
func TestScopeFastPathAllocations(t *testing.T) {
	srv, _ := connPair(t)
	allocs := testing.AllocsPerRun(200, func() {
		sc := newScope(context.Background(), srv, time.Now().Add(time.Minute))
		sc.settle()
		sc.end()
	})
	if allocs > 3 {
		t.Fatalf("%v allocations per request, want the context's only (≤ 3)", allocs)
	}
}

// Request ids are the server's prefix and a base-36 sequence number, each
// new, in one allocation.
func TestNextRequestID(t *testing.T) {
	s := &Server{reqPrefix: "bw-"}
	if a, b := s.nextRequestID(), s.nextRequestID(); a != "bw-1" || b != "bw-2" {
		t.Fatalf("ids %q, %q; want bw-1, bw-2", a, b)
	}
	s.reqSeq.Store(36*36 - 2)
	if id := s.nextRequestID(); id != "bw-zz" {
		t.Fatalf("id %q, want bw-zz", id)
	}
	if n := testing.AllocsPerRun(100, func() { _ = s.nextRequestID() }); n != 1 {
		t.Fatalf("%v allocations per id, want 1", n)
	}
}
