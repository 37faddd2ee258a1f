package wire

import (
	"strings"
	"testing"
)

func TestClip(t *testing.T) {
	short := strings.Repeat("m", MaxEcho)
	if got := Clip(short); got != short {
		t.Fatalf("a value of MaxEcho bytes changed: %q", got)
	}
	long := strings.Repeat("a", 1<<20)
	if got, want := Clip(long), strings.Repeat("a", MaxEcho)+"…[+1048320 bytes]"; got != want {
		t.Fatalf("1 MB value clipped to %d bytes: %q…", len(got), got[len(got)-30:])
	}
	// A multi-byte character straddling the cut is not split.
	s := strings.Repeat("a", MaxEcho-1) + "é" + strings.Repeat("b", 10)
	got := Clip(s)
	if !strings.HasPrefix(got, strings.Repeat("a", MaxEcho-1)+"…") || strings.Contains(got, "\xc3…") {
		t.Fatalf("clip split a character: %q", got[MaxEcho-4:])
	}
}
