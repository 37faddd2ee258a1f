package upstream

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// countingConn counts the deadlines set on a connection.
type countingConn struct {
	net.Conn
	reads, writes int
}

func (c *countingConn) SetReadDeadline(t time.Time) error {
	c.reads++
	return c.Conn.SetReadDeadline(t)
}

func (c *countingConn) SetWriteDeadline(t time.Time) error {
	c.writes++
	return c.Conn.SetWriteDeadline(t)
}

// A call's read and write deadlines are set on the socket only when they
// move: the next call's, a little later and within an eighth of the time
// left, keeps the one set; an earlier one, none, or a much later one is
// set. Over TLS (no write may go on after its deadline) every write
// deadline is set.
func TestPhasedConnSetsACallsDeadlinesOnlyWhenTheyMove(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cc := &countingConn{Conn: a}
	c := &phasedConn{Conn: cc, idle: time.Minute, retryWrites: true}
	now := time.Now()
	steps := []struct {
		at           time.Duration
		reads, write int
	}{
		{10 * time.Minute, 1, 1},                  // first deadline: set
		{10*time.Minute + time.Millisecond, 1, 1}, // a little later: kept
		{10*time.Minute + 30*time.Second, 1, 1},   // 30 s later, within three quarters of the time left: kept
		{5 * time.Minute, 2, 2},                   // earlier: set
		{30 * time.Minute, 3, 3},                  // much later: set
		{0, 4, 4},                                 // none: set
		{30 * time.Minute, 5, 5},                  // from none: set
	}
	for i, s := range steps {
		d := time.Time{}
		if s.at > 0 {
			d = now.Add(s.at)
		}
		if err := c.SetReadDeadline(d); err != nil {
			t.Fatal(err)
		}
		if err := c.SetWriteDeadline(d); err != nil {
			t.Fatal(err)
		}
		if cc.reads != s.reads || cc.writes != s.write {
			t.Fatalf("step %d: %d read and %d write deadlines set, want %d and %d", i, cc.reads, cc.writes, s.reads, s.write)
		}
	}
	tc := &countingConn{Conn: a}
	overTLS := &phasedConn{Conn: tc, idle: time.Minute}
	for range 3 {
		_ = overTLS.SetWriteDeadline(now.Add(10 * time.Minute))
	}
	if tc.writes != 3 {
		t.Fatalf("over TLS %d of 3 write deadlines set", tc.writes)
	}
}

// A deadline kept from an earlier call that passes before the current
// call's does not cut it: the wait for the first byte and a blocked write
// go on until the current call's own deadline, and fail then.
func TestPhasedConnKeptDeadlineCutsNothingEarly(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &phasedConn{Conn: a, idle: time.Minute, retryWrites: true}
	now := time.Now()
	first, second := now.Add(300*time.Millisecond), now.Add(330*time.Millisecond)
	_ = c.SetReadDeadline(first)
	_ = c.SetReadDeadline(second) // kept: the socket still says first
	if !c.read.Set.Equal(first) {
		t.Fatalf("socket read deadline %v, want the kept %v", c.read.Set, first)
	}
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) || time.Now().Before(second) {
		t.Fatalf("read ended at +%v with %v, want a timeout at +330ms", time.Since(now), err)
	}

	now = time.Now()
	first, second = now.Add(300*time.Millisecond), now.Add(330*time.Millisecond)
	_ = c.SetWriteDeadline(first)
	_ = c.SetWriteDeadline(second)
	if !c.write.Set.Equal(first) {
		t.Fatalf("socket write deadline %v, want the kept %v", c.write.Set, first)
	}
	_, err = c.Write([]byte("nobody reads this"))
	if !errors.Is(err, os.ErrDeadlineExceeded) || time.Now().Before(second) {
		t.Fatalf("write ended at +%v with %v, want a timeout at +330ms", time.Since(now), err)
	}

	// A kept deadline that passes while an answer is awaited, then the
	// answer arriving before the call's own deadline: read whole.
	now = time.Now()
	_ = c.SetReadDeadline(now.Add(200 * time.Millisecond))
	_ = c.SetReadDeadline(now.Add(600 * time.Millisecond))
	go func() {
		time.Sleep(250 * time.Millisecond) // after the kept one, well before the call's own
		_, _ = b.Write([]byte("ok"))
	}()
	buf := make([]byte, 2)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "ok" {
		t.Fatalf("read %q, %v; want the answer that came before the call's deadline", buf[:n], err)
	}
}
