//go:build !wasip1

package sdk

import (
	"errors"
	"sync"
	"time"
)

// This file replaces the host functions with in-memory fakes so plugin
// logic runs under a plain `go test`: Log records entries (FakeLogs), the
// KV store is a map (expiry judged against Now), and Now is a settable
// clock. CallRestate, CallClassify, CallOnRequest and CallRoute invoke the registered
// handlers through the same binary encoding the host uses. The fakes are
// goroutine-safe.

// LogEntry is one message recorded by the native Log fake.
type LogEntry struct {
	Level   LogLevel
	Message string
}

type fakeValue struct {
	value   []byte
	expires time.Time // zero = never
}

// fakes is the native stand-in for the host.
var fakes struct {
	mu   sync.Mutex
	logs []LogEntry
	kv   map[string]fakeValue
	now  time.Time
}

var errKV = errors.New("sdk: KV operation refused")

// Log records msg (truncated to MaxLogBytes) for FakeLogs.
func Log(level LogLevel, msg string) {
	if len(msg) > MaxLogBytes {
		msg = msg[:MaxLogBytes]
	}
	fakes.mu.Lock()
	fakes.logs = append(fakes.logs, LogEntry{Level: level, Message: msg})
	fakes.mu.Unlock()
}

// KVGet returns the fake store's live value for key. It fails, as the host
// does, for an empty key or one longer than MaxKeyBytes.
func KVGet(key string) ([]byte, bool, error) {
	if key == "" || len(key) > MaxKeyBytes {
		return nil, false, errKV
	}
	now := Now()
	fakes.mu.Lock()
	defer fakes.mu.Unlock()
	v, ok := fakes.kv[key]
	if !ok || (!v.expires.IsZero() && !now.Before(v.expires)) {
		return nil, false, nil
	}
	return append([]byte(nil), v.value...), true, nil
}

// KVSet stores value in the fake store (an empty value deletes the key),
// with the host's bounds.
func KVSet(key string, value []byte, ttl time.Duration) error {
	if key == "" || len(key) > MaxKeyBytes || len(value) > MaxValueBytes || ttl < 0 {
		return errKV
	}
	now := Now()
	fakes.mu.Lock()
	defer fakes.mu.Unlock()
	if len(value) == 0 {
		delete(fakes.kv, key)
		return nil
	}
	if fakes.kv == nil {
		fakes.kv = make(map[string]fakeValue)
	}
	v := fakeValue{value: append([]byte(nil), value...)}
	if ttl > 0 {
		v.expires = now.Add(ttl.Truncate(time.Millisecond))
	}
	fakes.kv[key] = v
	return nil
}

// Now returns the time set by SetNow, or the wall clock when none is set,
// at millisecond resolution like the host's.
func Now() time.Time {
	fakes.mu.Lock()
	t := fakes.now
	fakes.mu.Unlock()
	if t.IsZero() {
		t = time.Now()
	}
	return time.UnixMilli(t.UnixMilli())
}

// SetNow fixes the fake clock at t (the zero time restores the wall clock).
// Native builds only.
func SetNow(t time.Time) {
	fakes.mu.Lock()
	fakes.now = t
	fakes.mu.Unlock()
}

// FakeLogs returns the messages logged since the last ResetFakes. Native
// builds only.
func FakeLogs() []LogEntry {
	fakes.mu.Lock()
	defer fakes.mu.Unlock()
	return append([]LogEntry(nil), fakes.logs...)
}

// ResetFakes clears the recorded logs and the fake store and restores the
// wall clock. Native builds only.
func ResetFakes() {
	fakes.mu.Lock()
	fakes.logs, fakes.kv, fakes.now = nil, nil, time.Time{}
	fakes.mu.Unlock()
}

// CallRestate runs the registered restate handler the way the host does:
// the input is encoded, decoded by the SDK, and the answer encoded and
// decoded again. It returns false when there is no handler or no decision.
// Native builds only.
func CallRestate(in ErrorInput) (Restatement, bool) {
	out, ok := dispatchRestate(appendErrorInput(nil, &in), nil)
	var r Restatement
	if !ok || decodeRestatement(out, &r) != nil {
		return Restatement{}, false
	}
	return r, true
}

// CallClassify is CallRestate for the classify handler. Native builds only.
func CallClassify(in ErrorInput) (Decision, bool) {
	out, ok := dispatchClassify(appendErrorInput(nil, &in), nil)
	var r Decision
	if !ok || decodeDecision(out, &r) != nil {
		return Decision{}, false
	}
	return r, true
}

// CallOnRequest is CallRestate for the on_request handler. Native builds
// only.
func CallOnRequest(in RequestInfo) (RequestAction, bool) {
	out, ok := dispatchOnRequest(appendRequestInfo(nil, &in), nil)
	var r RequestAction
	if !ok || decodeRequestAction(out, &r) != nil {
		return RequestAction{}, false
	}
	return r, true
}

// CallRoute is CallRestate for the route handler. Native builds only.
func CallRoute(in RouteInput) (RouteAnswer, bool) {
	out, ok := dispatchRoute(appendRouteInput(nil, &in), nil)
	var r RouteAnswer
	if !ok || decodeRouteAnswer(out, &r) != nil {
		return RouteAnswer{}, false
	}
	return r, true
}
