package lazydeadline

import (
	"errors"
	"os"
	"testing"
	"time"
)

// A deadline is set on the socket when it moves: the first, an earlier
// one, a much later one, none; one a little later than the socket's (by
// at most half the time left) keeps it.
func TestAskSetsADeadlineOnlyWhenItMoves(t *testing.T) {
	now := time.Now()
	var d Deadline
	for i, s := range []struct {
		at  time.Duration
		set bool
	}{
		{time.Minute, true},                   // the first
		{time.Minute + time.Second, false},    // a little later: kept
		{time.Minute + 30*time.Second, false}, // 30 s later, within 3/4 of 90 s: kept
		{5 * time.Minute, true},               // 240 s later, past 3/4 of 300 s: set
		{time.Minute, true},                   // earlier: set
		{2 * time.Minute, false},              // an idle timeout after a read timeout half as long: kept
		{time.Minute + time.Second, false},    // the read timeout after it: kept
		{0, true},                             // none: set
		{time.Minute, true},                   // from none: set
	} {
		var at time.Time
		if s.at > 0 {
			at = now.Add(s.at)
		}
		if got := d.Ask(at); got != s.set || !d.Want.Equal(at) {
			t.Fatalf("step %d: Ask = %v (want %v), Want %v", i, got, s.set, d.Want)
		}
		if s.set && !d.Set.Equal(at) {
			t.Fatalf("step %d: the socket's deadline is %v, want %v", i, d.Set, at)
		}
	}
}

// A kept deadline passing early is moved to the one asked for; a deadline
// that passes on time, or another error, ends the read or write.
func TestEarlyMovesAKeptDeadlineThatPassed(t *testing.T) {
	now := time.Now()
	d := Deadline{Set: now.Add(-time.Millisecond), Want: now.Add(time.Hour)}
	if d.Early(errors.New("reset")) {
		t.Fatal("another error taken for an early deadline")
	}
	if !d.Early(os.ErrDeadlineExceeded) || !d.Set.Equal(d.Want) {
		t.Fatalf("kept deadline passed early not moved: %+v", d)
	}
	if d.Early(os.ErrDeadlineExceeded) {
		t.Fatal("the deadline asked for, passed, taken for an early one")
	}
	past := Deadline{Set: now.Add(-2 * time.Second), Want: now.Add(-time.Second)}
	if past.Early(os.ErrDeadlineExceeded) {
		t.Fatal("a deadline asked for that passed taken for an early one")
	}
	x := Deadline{Set: now, Want: now.Add(time.Minute)}
	if !x.Exact() || !x.Set.Equal(x.Want) || x.Exact() {
		t.Fatalf("Exact: %+v", x)
	}
	x.Forced(now)
	if !x.Set.Equal(now) || !x.Want.Equal(now) {
		t.Fatalf("Forced: %+v", x)
	}
}
