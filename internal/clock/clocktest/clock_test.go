package clocktest

import (
	"testing"
	"time"
)

var epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// Timers fire when the clock reaches them, in deadline order; a stopped
// timer never fires; a non-positive duration fires at once.
func TestClockTimers(t *testing.T) {
	c := NewClock(epoch)
	late, early, stopped := c.NewTimer(3*time.Second), c.NewTimer(time.Second), c.NewTimer(2*time.Second)
	if c.Pending() != 3 || !stopped.Stop() || stopped.Stop() || c.Pending() != 2 {
		t.Fatalf("pending %d after a stop", c.Pending())
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-early.C():
		t.Fatal("fired early")
	default:
	}
	c.Advance(time.Millisecond)
	if got := <-early.C(); !got.Equal(epoch.Add(time.Second)) {
		t.Fatalf("fired with %v", got)
	}
	c.Set(epoch.Add(5 * time.Second))
	if got := <-late.C(); !got.Equal(epoch.Add(3*time.Second)) || !c.Now().Equal(epoch.Add(5*time.Second)) || c.Pending() != 0 {
		t.Fatalf("late fired %v at %v", got, c.Now())
	}
	select {
	case <-stopped.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	<-c.NewTimer(0).C()
}

// WaitForTimers returns once the code under test sleeps on the clock.
func TestWaitForTimers(t *testing.T) {
	c := NewClock(epoch)
	if c.WaitForTimers(1, 10*time.Millisecond) {
		t.Fatal("no timer was made")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-c.NewTimer(time.Minute).C()
	}()
	if !c.WaitForTimers(1, 5*time.Second) {
		t.Fatal("the sleeping goroutine was not seen")
	}
	c.Advance(time.Minute)
	<-done
}
