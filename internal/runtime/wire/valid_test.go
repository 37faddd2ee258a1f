package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestScannerValidatesAsEncodingJSON: the scanner checks the body in its
// own pass and agrees with json.Valid on every corner of the grammar —
// numbers, escapes, control bytes, invalid UTF-8 (accepted, as
// encoding/json accepts it), literals, separators, trailing bytes and the
// nesting limit of 10,000 containers. A body json.Valid refuses is refused
// as not valid JSON before any complaint about a field.
func TestScannerValidatesAsEncodingJSON(t *testing.T) {
	eachPlainRun(t, scannerValidates)
}

func scannerValidates(t *testing.T) {
	deep := func(n int, open, closer string) string {
		return strings.Repeat(open, n) + strings.Repeat(closer, n)
	}
	docs := []string{
		``, ` `, `{`, `}`, `{}`, `[]`, `[`, `]`, `null`, `nul`, `nulll`, `true`, `tru`, `false`, `fals`, `True`,
		`0`, `-0`, `-`, `01`, `-01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1e5`, `1E-5`, `1.5e+07`, `-1.0e0`, `+1`, `0x1`, `1_000`, `١`,
		`""`, `"`, `"\"`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\a"`, `"\x41"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u00e"`, `"\U00e9"`,
		"\"a\x00b\"", "\"a\x1fb\"", "\"a\x7fb\"", "\"\xff\xfe\"", "\"\xed\xa0\x80\"", `"\ud800"`, "\"tab\there\"",
		`{"a":1}`, `{"a" 1}`, `{"a":1,}`, `{,"a":1}`, `{"a":1,,"b":2}`, `{"a":1 "b":2}`, `{a:1}`, `{'a':1}`, `{"a":}`, `{"a"}`, `{1:2}`,
		`[1,2]`, `[1,]`, `[,1]`, `[1 2]`, `[[]]`, `[[]`, `[]]`, `[{}]`, `[{]}`, `{"a":[}`, `{"a":{"b":[1,{"c":null}]}}`,
		" \t\r\n{} \t\r\n", "{}\n\n", "{} x", "{}{}", "\v{}", "\u00a0{}", "\xef\xbb\xbf{}",
		deep(maxDepth, "[", "]"), deep(maxDepth+1, "[", "]"), deep(maxDepth-1, "[", "]"),
		"{\"a\":" + deep(maxDepth-1, "[", "]") + "}", "{\"a\":" + deep(maxDepth, "[", "]") + "}",
		"{\"a\":" + deep(maxDepth-2, "[", "]") + ",\"b\":{}}", "{\"a\":" + strings.Repeat(`{"b":`, maxDepth-1) + "1" + strings.Repeat("}", maxDepth-1) + "}",
		"{\"a\":" + strings.Repeat(`{"b":`, maxDepth) + "1" + strings.Repeat("}", maxDepth) + "}",
		`{"a":"` + strings.Repeat(`0123456789abcdef`, 40) + `\n` + strings.Repeat(`é`, 9) + `"}`,
		`{"a":"` + strings.Repeat(`x`, 13) + "\x01" + `"}`, `{"a":"` + strings.Repeat(`x`, 21) + `\q"}`,
	}
	for _, d := range docs {
		want := json.Valid([]byte(d))
		if got := Valid([]byte(d)); got != want {
			t.Errorf("Valid(%.60q) = %v, json.Valid %v", d, got, want)
		}
		_, err := Parse([]byte(d))
		var fe *FieldError
		refusedAsJSON := errors.As(err, &fe) && *fe == *notJSON()
		if refusedAsJSON == want {
			t.Errorf("Parse(%.60q): %v; json.Valid %v", d, err, want)
		}
	}
}

// TestFieldErrorsWaitForTheWholeBody: a routing field's error is only
// reported for a body that is valid JSON; in a broken body, the body is
// the error (as when the whole body was checked before the fields).
func TestFieldErrorsWaitForTheWholeBody(t *testing.T) {
	cases := []struct{ body, field, message string }{
		{`{"model":3,"messages":[1]}`, "model", "must be a string"},
		{`{"model":3,"messages":[1}`, "body", "request body is not valid JSON"},
		{`{"model":"m","model":"n","messages":[1]`, "body", "request body is not valid JSON"},
		{`{"model":"m","model":"n","messages":[1]}`, "model", "appears more than once"},
		{`{"Model":"m","x":tru}`, "body", "request body is not valid JSON"},
		{`{"stream":"yes","messages":[1],"model":"m"} x`, "body", "request body is not valid JSON"},
		{`["model"]`, "body", "request body must be a JSON object"},
		{`["model"`, "body", "request body is not valid JSON"},
		{`{"messages":[1]}`, "model", "is required"},
		{`{"messages":[1]`, "body", "request body is not valid JSON"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.body))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || fe.Message != tc.message {
			t.Errorf("Parse(%s) = %v, want %s: %s", tc.body, err, tc.field, tc.message)
		}
	}
}

// TestLongStringsAgreeWithEncodingJSON: long runs of plain string content
// go through plainRun; a quote, an escape, a bad escape, a control byte or
// non-ASCII text at any distance from where the run starts, from the
// 32-byte blocks' edges and from the window's, is read as encoding/json
// reads it (and a string that never ends is refused).
func TestLongStringsAgreeWithEncodingJSON(t *testing.T) {
	eachPlainRun(t, longStringsAgree)
}

func longStringsAgree(t *testing.T) {
	inserts := []string{`"`, `\"`, `\\`, `\n`, `\u00e9`, `\x`, `\u12`, "\x01", "\x1f", "\x7f", "é", "\xff", `"]},"x":"`}
	for _, n := range []int{100, 127, 128, 129, 160, 161, 2047, 2048, 2049, 2200, 4096 + 129, 5000} {
		for _, at := range []int{0, 1, 7, 8, 31, 32, 33, 120, 121, 127, 128, 129, 136, 159, 160, 161, 191, 192, 2047, 2048, 2049, 2176, 2177, 4224, n - 1} {
			if at >= n {
				continue
			}
			for _, ins := range inserts {
				content := strings.Repeat("a", at) + ins + strings.Repeat("b", n-at)
				for _, body := range []string{
					`{"model":"m","messages":["` + content + `"]}`,
					`{"model":"m","messages":["` + content, // never ends
				} {
					b := []byte(body)
					if got, want := Valid(b), json.Valid(b); got != want {
						t.Fatalf("len %d, %q at %d: Valid %v, json.Valid %v", n, ins, at, got, want)
					}
					_, err := Parse(b)
					if (err == nil) != json.Valid(b) {
						t.Fatalf("len %d, %q at %d: Parse %v, json.Valid %v", n, ins, at, err, json.Valid(b))
					}
				}
			}
		}
	}
}

// eachPlainRun runs test with each implementation of plainRun this
// machine has: the vector one (when vectorStops) and the portable one.
func eachPlainRun(t *testing.T, test func(t *testing.T)) {
	t.Helper()
	vector := vectorStops
	defer func() { vectorStops = vector }()
	if vector {
		t.Run("vector", test)
	}
	vectorStops = false
	t.Run("portable", test)
}

// TestPlainRunStopsBeforeEveryStop: whichever implementation runs, plainRun
// skips only plain content and stops at most 32 bytes before the first
// quote, backslash or control byte (or the end of the body), whatever its
// distance from the start and the blocks' edges and whatever comes after
// it; the vector one stops exactly on it when it lies in a whole block.
func TestPlainRunStopsBeforeEveryStop(t *testing.T) {
	// Plain content around the stop: ASCII, the bytes next to the
	// stops' values, UTF-8 and a byte that is not.
	const plain = "a \x20!#[]\x7f\xc3\xa9\xff"
	eachPlainRun(t, func(t *testing.T) {
		for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 65, 95, 96, 127, 128, 129, 200, 2047, 2048, 2049, 4100} {
			for _, from := range []int{0, 1, 7, 31, 32, 33} {
				for _, stop := range []byte{'"', '\\', 0x00, 0x0a, 0x1f} {
					for at := from; at <= n; at += max(1, (n-from)/40) {
						b := []byte(strings.Repeat(plain, n/len(plain)+1)[:n])
						want := n
						if at < n {
							b[at] = stop
							want = at
						}
						got := plainRun(b, from)
						if got < from || got > want || want-got > 32 {
							t.Fatalf("len %d from %d, %q at %d: plainRun = %d", n, from, stop, at, got)
						}
						if vectorStops && want < from+(n-from)&^31 && got != want {
							t.Fatalf("len %d from %d, %q at %d: vector plainRun = %d, not on the stop", n, from, stop, at, got)
						}
					}
				}
			}
		}
	})
}
