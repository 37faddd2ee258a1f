// Package envelope is the on-disk and on-wire value format shared by the
// persistent store backends: a value carries its own expiry so that TTLs are
// judged against the store's injected clock, not the database's wall clock.
//
// Layout: one version byte '1', nineteen ASCII decimal digits holding the
// expiry as Unix nanoseconds zero-padded to fixed width ("0000000000000000000"
// means "never expires"), then the payload bytes. Fixed-width digits make
// the expiry comparable as a plain string, which the Redis Lua scripts rely on.
//
// All functions are pure and goroutine-safe.
package envelope

import (
	"errors"
	"strconv"
	"time"
)

// Version is the leading byte of every envelope.
const Version = '1'

// StampLen is the number of decimal digits of the expiry stamp.
const StampLen = 19

// HeaderLen is the number of bytes before the payload.
const HeaderLen = 1 + StampLen

// NoExpiry is the stamp of a value that never expires.
const NoExpiry = "0000000000000000000"

// ErrMalformed is returned by Decode for bytes that are not an envelope.
var ErrMalformed = errors.New("malformed stored value")

// Expiry returns the absolute expiry of a value written at now with ttl, or
// the zero Time when ttl <= 0 (no expiry).
func Expiry(now time.Time, ttl time.Duration) time.Time {
	if ttl <= 0 {
		return time.Time{}
	}
	return now.Add(ttl)
}

// Stamp formats t as a fixed-width expiry stamp. The zero Time formats as
// NoExpiry; times at or before the Unix epoch clamp to 1 ns (already
// expired for any realistic clock) and times beyond 2262 clamp to the largest
// representable stamp.
func Stamp(t time.Time) string {
	if t.IsZero() {
		return NoExpiry
	}
	return pad(nanos(t, 1))
}

// NowStamp formats the current time for comparison with stored stamps: a
// value is alive while NowStamp(now) < its stamp. Times before the epoch
// clamp to 0.
func NowStamp(now time.Time) string {
	return pad(nanos(now, 0))
}

// nanos returns t in Unix nanoseconds clamped to [min, MaxInt64].
func nanos(t time.Time, min int64) int64 {
	const maxNanos = int64(^uint64(0) >> 1)
	if t.Before(time.Unix(0, min)) {
		return min
	}
	if t.After(time.Unix(0, maxNanos)) {
		return maxNanos
	}
	return t.UnixNano()
}

func pad(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) >= StampLen {
		return s
	}
	return NoExpiry[:StampLen-len(s)] + s
}

// Encode wraps payload with the expiry stamp of expires (zero = never).
func Encode(payload []byte, expires time.Time) []byte {
	out := make([]byte, 0, HeaderLen+len(payload))
	out = append(out, Version)
	out = append(out, Stamp(expires)...)
	return append(out, payload...)
}

// Decode splits raw into its stamp and payload. The payload aliases raw.
func Decode(raw []byte) (stamp string, payload []byte, err error) {
	if len(raw) < HeaderLen || raw[0] != Version {
		return "", nil, ErrMalformed
	}
	for _, c := range raw[1:HeaderLen] {
		if c < '0' || c > '9' {
			return "", nil, ErrMalformed
		}
	}
	return string(raw[1:HeaderLen]), raw[HeaderLen:], nil
}

// Alive reports whether a value with the given stamp is still live at now.
// A value expires exactly at its expiry instant.
func Alive(stamp string, now time.Time) bool {
	return stamp == NoExpiry || NowStamp(now) < stamp
}
