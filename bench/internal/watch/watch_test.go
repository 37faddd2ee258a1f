package watch

import (
	"context"
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// series builds samples 50 ms apart from (calls, state, last) triples.
func series(rows ...any) []Sample {
	var out []Sample
	for i := 0; i+2 < len(rows); i += 3 {
		n := len(out)
		out = append(out, Sample{At: t0.Add(time.Duration(n) * 50 * time.Millisecond),
			Calls: int64(rows[i].(int)), State: rows[i+1].(string), Last: rows[i+2].(string)})
	}
	return out
}

func TestAttribute(t *testing.T) {
	const (
		C, D, O, H = StateClosed, StateDegraded, StateOpen, StateHalfOpen
		trip       = "OPEN@1"
		probe      = "HALF_OPEN@2"
		reopen     = "OPEN@3"
		closed     = "CLOSED@4"
	)
	tests := []struct {
		name    string
		samples []Sample
		want    Tally
	}{
		{
			name: "calls while OPEN throughout are wasted",
			// windows: w0 unbracketed (5), w1 bracketed by O/O (2 wasted), w2 O/O (0)
			samples: series(0, O, trip, 5, O, trip, 7, O, trip, 7, O, trip),
			want: Tally{Unattributed: 5, Open: 2, OpenPeriods: 1, Windows: 3,
				UnattributedTime: 50 * time.Millisecond, OpenTime: 100 * time.Millisecond},
		},
		{
			name: "a trip and a probe are unattributed, HALF_OPEN throughout is a probe",
			// w0 unbracketed; w1 C..O (trip) → unattributed 12; w2 C..O → 0;
			// w3 O..O → 0 wasted; w4 O..H → 1 unattributed (the probe);
			// w5 O..H → 0; w6 H..H → 1 probe call; w7 H..O(reopen) → 0
			samples: series(0, C, "", 0, C, "", 12, O, trip, 12, O, trip, 12, O, trip,
				13, H, probe, 13, H, probe, 14, H, probe, 14, O, reopen),
			want: Tally{Unattributed: 13, HalfOpen: 1, OpenPeriods: 2, Windows: 8,
				UnattributedTime: 300 * time.Millisecond, OpenTime: 50 * time.Millisecond, HalfOpenTime: 50 * time.Millisecond},
		},
		{
			name: "OPEN at both reads but a new transition in between is not attributed",
			// w1 is bracketed by OPEN@1 and OPEN@3: a probe cycle happened.
			samples: series(0, O, trip, 1, O, reopen, 1, O, reopen),
			want: Tally{Unattributed: 1, OpenPeriods: 2, Windows: 2,
				UnattributedTime: 100 * time.Millisecond},
		},
		{
			name:    "CLOSED and DEGRADED count as closed",
			samples: series(0, D, "DEGRADED@1", 4, D, "DEGRADED@1", 9, D, "DEGRADED@1", 10, C, closed, 11, C, closed, 20, C, closed),
			want: Tally{Unattributed: 4 + 1 + 1, Closed: 5 + 9, Windows: 5,
				UnattributedTime: 150 * time.Millisecond, ClosedTime: 100 * time.Millisecond},
		},
		{
			name:    "a counter reset counts no calls",
			samples: series(10, O, trip, 10, O, trip, 3, O, trip),
			want:    Tally{OpenPeriods: 1, Windows: 2, UnattributedTime: 50 * time.Millisecond, OpenTime: 50 * time.Millisecond},
		},
		{name: "one sample", samples: series(3, O, trip), want: Tally{OpenPeriods: 1}},
		{name: "none", samples: nil, want: Tally{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Attribute(tt.samples); got != tt.want {
				t.Fatalf("Attribute =\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

func TestAttributeConservesCalls(t *testing.T) {
	s := series(0, "", "", 3, StateClosed, "", 9, StateOpen, "x", 10, StateOpen, "x", 10, StateHalfOpen, "y", 15, StateClosed, "z")
	got := Attribute(s)
	if sum := got.Open + got.HalfOpen + got.Closed + got.Unattributed; sum != 15 {
		t.Fatalf("calls attributed = %d, want all 15: %+v", sum, got)
	}
	if span := got.OpenTime + got.HalfOpenTime + got.ClosedTime + got.UnattributedTime; span != 250*time.Millisecond {
		t.Fatalf("time covered = %v, want 250ms", span)
	}
}

func TestRecovery(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	from := at(1000)
	tests := []struct {
		name    string
		samples []Sample
		want    Resumed
	}{
		{
			name: "probe at the reset timeout, then CLOSED",
			samples: []Sample{
				{At: at(990), Calls: 9, State: StateOpen}, // before from: ignored
				{At: at(1050), Calls: 5, State: StateOpen},
				{At: at(2840), Calls: 5, State: StateOpen},
				{At: at(2890), Calls: 6, State: StateHalfOpen},
				{At: at(2940), Calls: 9, State: StateClosed},
			},
			want: Resumed{Called: true, FirstCallAfter: 1890 * time.Millisecond, FirstCallAfterLow: 1840 * time.Millisecond,
				Closed: true, ClosedAfter: 1940 * time.Millisecond},
		},
		{
			name:    "first read already sees a call",
			samples: []Sample{{At: at(1040), Calls: 6, State: StateClosed}},
			want: Resumed{Called: true, FirstCallAfter: 40 * time.Millisecond, FirstCallAfterLow: 0,
				Closed: true, ClosedAfter: 40 * time.Millisecond},
		},
		{
			name:    "CLOSED before any call does not count as recovered",
			samples: []Sample{{At: at(1100), Calls: 5, State: StateClosed}, {At: at(1150), Calls: 5, State: StateClosed}},
			want:    Resumed{},
		},
		{
			name:    "called but the probe failed",
			samples: []Sample{{At: at(1500), Calls: 6, State: StateHalfOpen}, {At: at(1550), Calls: 6, State: StateOpen}},
			want:    Resumed{Called: true, FirstCallAfter: 500 * time.Millisecond, FirstCallAfterLow: 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Recovery(from, 5, tt.samples); got != tt.want {
				t.Fatalf("Recovery = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPollKeepsGoodReadsUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	got := Poll(ctx, time.Millisecond, func(context.Context) (int, error) {
		n++
		if n == 5 {
			cancel()
		}
		if n%2 == 0 {
			return 0, errors.New("read failed")
		}
		return n, nil
	})
	if len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != 5 {
		t.Fatalf("Poll = %v, want [1 3 5] (failed reads dropped, stop on cancel)", got)
	}
}

func TestGaps(t *testing.T) {
	s := []Sample{{At: t0}, {At: t0.Add(50 * time.Millisecond)}, {At: t0.Add(110 * time.Millisecond)}, {At: t0.Add(300 * time.Millisecond)}}
	med, big := Gaps(s)
	if med != 60*time.Millisecond || big != 190*time.Millisecond {
		t.Fatalf("Gaps = %v, %v; want 60ms, 190ms", med, big)
	}
	if med, big := Gaps(s[:1]); med != 0 || big != 0 {
		t.Fatalf("Gaps of one sample = %v, %v", med, big)
	}
}
