package admission

import (
	"testing"
	"time"
)

func TestFakeClockFiresInOrder(t *testing.T) {
	clk := NewFakeClock(t0)
	late := clk.NewTimer(3 * time.Second)
	early := clk.NewTimer(time.Second)
	stopped := clk.NewTimer(2 * time.Second)
	now := clk.NewTimer(0)
	select {
	case v := <-now.C():
		if !v.Equal(t0) {
			t.Errorf("immediate timer fired with %v", v)
		}
	default:
		t.Fatal("non-positive timer did not fire at once")
	}
	if !stopped.Stop() || stopped.Stop() {
		t.Error("Stop of a pending timer must report true once")
	}
	if clk.Pending() != 2 {
		t.Fatalf("pending = %d", clk.Pending())
	}
	clk.Advance(999 * time.Millisecond)
	select {
	case <-early.C():
		t.Fatal("fired early")
	default:
	}
	clk.Advance(5 * time.Second)
	if v := <-early.C(); !v.Equal(t0.Add(time.Second)) {
		t.Errorf("early fired with %v", v)
	}
	if v := <-late.C(); !v.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("late fired with %v", v)
	}
	if late.Stop() || clk.Pending() != 0 || !clk.Now().Equal(t0.Add(5999*time.Millisecond)) {
		t.Error("fired timers must be gone")
	}
	sys := SystemClock()
	tm := sys.NewTimer(time.Hour)
	if !tm.Stop() || sys.Now().IsZero() {
		t.Error("system clock")
	}
}
