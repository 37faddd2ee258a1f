package strategy

import (
	"math"
	"testing"
	"time"
)

// FuzzParseQuotaHeaders: whatever the remaining, limit and reset headers
// say, ParseQuotaHeaders never panics; a quota it finds has a finite
// remaining ≥ 0 and a finite limit that is 0 (not reported) or > 0; a
// reset it reads is a real instant (not before 1970, where an overflowing
// number would wrap to); and the headroom is in [0, 1], 0 when nothing
// remains of a known limit until a reset still ahead.
func FuzzParseQuotaHeaders(f *testing.F) {
	f.Add(uint8(0), "0", "10000", "8.64s")
	f.Add(uint8(3), "0", "50", "2025-06-01T12:00:20Z")
	f.Add(uint8(2), "12.5", "", "1748779260")
	f.Add(uint8(1), "3", "0", "1748779260000")
	f.Add(uint8(4), "1e308", "1e-300", "6m0s")
	f.Add(uint8(0), "0", "100", "1e300")
	f.Add(uint8(0), "NaN", "Inf", "-5s")
	f.Add(uint8(5), "0", "1", "9999-12-31T23:59:59Z")
	f.Add(uint8(0), "0", "1", "253402300799")
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, dim uint8, remaining, limit, reset string) {
		d := quotaDims[int(dim)%len(quotaDims)]
		h := map[string]string{d.remaining: remaining, d.limit: limit, d.reset: reset}
		q, ok := ParseQuotaHeaders(h, now)
		if !ok {
			if q != (Quota{}) {
				t.Fatalf("no quota found but %+v returned", q)
			}
			return
		}
		if q.Remaining < 0 || math.IsNaN(q.Remaining) || math.IsInf(q.Remaining, 0) {
			t.Fatalf("remaining %v from %q", q.Remaining, remaining)
		}
		if q.Limit < 0 || math.IsNaN(q.Limit) || math.IsInf(q.Limit, 0) {
			t.Fatalf("limit %v from %q", q.Limit, limit)
		}
		if !q.ResetAt.IsZero() && q.ResetAt.Before(time.Unix(0, 0)) {
			t.Fatalf("reset %q read as %v, before 1970", reset, q.ResetAt)
		}
		hr := q.Headroom(now)
		if hr < 0 || hr > 1 || math.IsNaN(hr) {
			t.Fatalf("headroom %v of %+v", hr, q)
		}
		if q.Limit > 0 && q.Remaining == 0 && q.ResetAt.After(now) && hr != 0 {
			t.Fatalf("nothing left until %v but headroom %v (reset %q)", q.ResetAt, hr, reset)
		}
	})
}
