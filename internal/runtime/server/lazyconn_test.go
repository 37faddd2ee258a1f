package server

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair is a connected pair of plain TCP sockets on loopback.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// On a plain TCP connection the deadlines fasthttp sets for each request
// (the idle timeout, then the read timeout; the write timeout) are set on
// the socket only when they move, and a kept one that passes early cuts
// nothing: a read waits until the deadline asked for. The client
// watcher's peek gets the exact deadline.
func TestClientConnSetsDeadlinesLazilyAndCutsNothingEarly(t *testing.T) {
	s, c := tcpPair(t)
	lc := &lingerConn{Conn: s, lazy: true}
	now := time.Now()
	_ = lc.SetReadDeadline(now.Add(60 * time.Second)) // a request's read timeout: set
	_ = lc.SetWriteDeadline(now.Add(60 * time.Second))
	first := lc.read.Set
	_ = lc.SetReadDeadline(now.Add(120 * time.Second)) // the next one's idle timeout: kept
	_ = lc.SetReadDeadline(now.Add(61 * time.Second))  // its read timeout: kept
	_ = lc.SetWriteDeadline(now.Add(61 * time.Second))
	if !lc.read.Set.Equal(first) || !lc.write.Set.Equal(first) || !lc.read.Want.Equal(now.Add(61*time.Second)) {
		t.Fatalf("deadlines moved on the socket: read %+v write %+v", lc.read, lc.write)
	}
	lc.exactReadDeadline()
	if !lc.read.Set.Equal(lc.read.Want) {
		t.Fatalf("the watcher's deadline is not exact: %+v", lc.read)
	}

	now = time.Now()
	asked := now.Add(330 * time.Millisecond)
	_ = lc.SetReadDeadline(now.Add(300 * time.Millisecond))
	_ = lc.SetReadDeadline(asked) // kept: the socket still says +300 ms
	if lc.read.Set.Equal(asked) {
		t.Fatal("the deadline was not kept")
	}
	_, err := lc.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) || time.Now().Before(asked) {
		t.Fatalf("read ended at +%v with %v, want a timeout at +330ms", time.Since(now), err)
	}

	// A kept deadline passing while the client is idle, then its next
	// request arriving before the deadline asked for: read whole.
	now = time.Now()
	_ = lc.SetReadDeadline(now.Add(200 * time.Millisecond))
	_ = lc.SetReadDeadline(now.Add(600 * time.Millisecond))
	go func() {
		time.Sleep(250 * time.Millisecond) // after the kept one, well before the one asked for
		_, _ = c.Write([]byte("ok"))
	}()
	buf := make([]byte, 2)
	if n, err := lc.Read(buf); err != nil || string(buf[:n]) != "ok" {
		t.Fatalf("read %q, %v; want the request that came before the deadline", buf[:n], err)
	}

	// Not a plain TCP socket (lazy off): every deadline is set.
	other := &lingerConn{Conn: s}
	_ = other.SetReadDeadline(time.Now().Add(time.Minute))
	if !other.read.Set.IsZero() {
		t.Fatalf("lazy deadlines on a connection that may not use them: %+v", other.read)
	}
}
