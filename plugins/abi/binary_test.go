package abi

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

var sampleInput = ErrorInput{
	Provider: "acmé", Connection: "acme/main", Model: "gpt-5", Profile: "apikey", Status: 429,
	Headers:   map[string]string{"retry-after": "7", "x-emoji": "🚀", "x-empty": ""},
	ErrorCode: "insufficient_quota", ErrorType: "rate_limit_error",
	Body: `{"error":{"message":"Quota \"exceeded\""}}` + "\u00e9",
}

func TestBinaryRoundTrip(t *testing.T) {
	in, err := DecodeErrorInputBinary(AppendErrorInputBinary(nil, &sampleInput))
	if err != nil || !reflect.DeepEqual(in, sampleInput) {
		t.Errorf("ErrorInput round trip = %+v, %v", in, err)
	}
	empty, err := DecodeErrorInputBinary(AppendErrorInputBinary(nil, &ErrorInput{}))
	if err != nil || !reflect.DeepEqual(empty, ErrorInput{}) {
		t.Errorf("empty ErrorInput round trip = %+v, %v", empty, err)
	}
	rs := Restatement{Status: 429, RetryAfterMS: -1 << 40, RuleID: "r.1"}
	if got, err := DecodeRestatementBinary(AppendRestatementBinary(nil, &rs)); err != nil || got != rs {
		t.Errorf("Restatement round trip = %+v, %v", got, err)
	}
	d := Decision{Reason: "quota_exhausted", Scope: "model", CooldownMS: 86_399_000, RuleID: "acme.quota"}
	if got, err := DecodeDecisionBinary(AppendDecisionBinary(nil, &d), nil); err != nil || got != d {
		t.Errorf("Decision round trip = %+v, %v", got, err)
	}
	ri := RequestInfo{Model: "m", Path: "/v1/chat/completions", KeyID: "k", Headers: map[string]string{"x-team": "blue"}}
	if got, err := DecodeRequestInfoBinary(AppendRequestInfoBinary(nil, &ri)); err != nil || !reflect.DeepEqual(got, ri) {
		t.Errorf("RequestInfo round trip = %+v, %v", got, err)
	}
	ra := RequestAction{Model: "m2", SetHeaders: map[string]string{"x-a": "1", "x-b": ""}, RejectStatus: 403, RejectMessage: "no"}
	if got, err := DecodeRequestActionBinary(AppendRequestActionBinary(nil, &ra)); err != nil || !reflect.DeepEqual(got, ra) {
		t.Errorf("RequestAction round trip = %+v, %v", got, err)
	}
}

// TestBinaryLayout pins the documented layout of a Decision byte by byte.
func TestBinaryEncodesValidUTF8Only(t *testing.T) {
	in := ErrorInput{Provider: "p\xffq", Body: "ok\xc3"}
	got, err := DecodeErrorInputBinary(AppendErrorInputBinary(nil, &in))
	if err != nil || got.Provider != "p\uFFFDq" || got.Body != "ok\uFFFD" {
		t.Errorf("decoded %+v, %v; want invalid bytes replaced by U+FFFD", got, err)
	}
}

func TestBinaryLayout(t *testing.T) {
	got := AppendDecisionBinary(nil, &Decision{Reason: "rate_limit", Scope: "", CooldownMS: 258, RuleID: "x"})
	want := []byte{10, 0, 0, 0}
	want = append(want, "rate_limit"...)
	want = append(want, 0, 0, 0, 0)
	want = append(want, 2, 1, 0, 0, 0, 0, 0, 0)
	want = append(want, 1, 0, 0, 0, 'x')
	if string(got) != string(want) {
		t.Errorf("Decision encoding\n  %v\nwant\n  %v", got, want)
	}
}

func TestBinaryRejectsMalformed(t *testing.T) {
	full := AppendErrorInputBinary(nil, &sampleInput)
	for n := range len(full) {
		if _, err := DecodeErrorInputBinary(full[:n]); err == nil {
			t.Fatalf("a value cut to %d of %d bytes decoded", n, len(full))
		}
	}
	if _, err := DecodeErrorInputBinary(append(full, 0)); err == nil || !strings.Contains(err.Error(), "after the last field") {
		t.Errorf("trailing byte: err = %v", err)
	}
	d := AppendDecisionBinary(nil, &Decision{Reason: "rate_limit", RuleID: "ok"})
	bad := append([]byte(nil), d...)
	bad[len(bad)-1] = 0xff
	if _, err := DecodeDecisionBinary(bad, nil); err == nil || !strings.Contains(err.Error(), "rule_id is not valid UTF-8") {
		t.Errorf("invalid UTF-8: err = %v", err)
	}
	huge := binary.LittleEndian.AppendUint32(nil, 1<<31)
	if _, err := DecodeDecisionBinary(huge, nil); err == nil {
		t.Error("a string longer than the value decoded")
	}
	// A map count that cannot fit is refused before anything is allocated.
	ri := binaryStrings("m", "p", "k")
	ri = binary.LittleEndian.AppendUint32(ri, 1<<30)
	if _, err := DecodeRequestInfoBinary(ri); err == nil || !strings.Contains(err.Error(), "pairs") {
		t.Errorf("oversized map count: err = %v", err)
	}
	status := binaryStrings("p", "c", "m", "pr")
	status = binary.LittleEndian.AppendUint64(status, 1<<40)
	if _, err := DecodeErrorInputBinary(status); err == nil || !strings.Contains(err.Error(), "status") {
		t.Errorf("status out of range: err = %v", err)
	}
}

// binaryStrings returns the binary encoding of each string, concatenated.
func binaryStrings(ss ...string) []byte {
	var b []byte
	for _, s := range ss {
		b = appendBinaryString(b, s)
	}
	return b
}

func TestDecodeDecisionInternsKnownNames(t *testing.T) {
	known := map[string]string{"rate_limit": "rate_limit", "connection": "connection"}
	b := AppendDecisionBinary(nil, &Decision{Reason: "rate_limit", Scope: "connection", RuleID: "r"})
	if n := testing.AllocsPerRun(100, func() {
		if _, err := DecodeDecisionBinary(b, known); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Errorf("decoding a decision with known names allocates %.0f times, want ≤ 1 (the rule id)", n)
	}
}

// FuzzDecodeBinary feeds arbitrary bytes to every binary decoder of the
// ABI (the host decodes guest answers with them): none panics, and every
// value one accepts re-encodes to bytes that decode to the same value.
func FuzzDecodeBinary(f *testing.F) {
	f.Add(AppendErrorInputBinary(nil, &sampleInput))
	f.Add(AppendDecisionBinary(nil, &Decision{Reason: "rate_limit", RuleID: "x"}))
	f.Add(AppendRequestActionBinary(nil, &RequestAction{SetHeaders: map[string]string{"a": "b"}}))
	f.Add(AppendRestatementBinary(nil, &Restatement{Status: 429, RetryAfterMS: 60000, RuleID: "r"}))
	f.Add(AppendRequestInfoBinary(nil, &RequestInfo{Model: "m", Path: "/v1/messages", Headers: map[string]string{"x": "y"}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, DecodeErrorInputBinary, AppendErrorInputBinary)
		roundTrip(t, b, DecodeRestatementBinary, AppendRestatementBinary)
		roundTrip(t, b, func(b []byte) (Decision, error) { return DecodeDecisionBinary(b, map[string]string{"a": "a"}) }, AppendDecisionBinary)
		roundTrip(t, b, DecodeRequestInfoBinary, AppendRequestInfoBinary)
		roundTrip(t, b, DecodeRequestActionBinary, AppendRequestActionBinary)
	})
}

// roundTrip decodes b and, when that succeeds, checks that the value
// re-encodes to bytes that decode to the same value.
func roundTrip[T any](t *testing.T, b []byte, decode func([]byte) (T, error), encode func([]byte, *T) []byte) {
	t.Helper()
	v, err := decode(b)
	if err != nil {
		return
	}
	again, err := decode(encode(nil, &v))
	if err != nil || !reflect.DeepEqual(again, v) {
		t.Fatalf("re-encoding %+v gave %+v, %v", v, again, err)
	}
}
