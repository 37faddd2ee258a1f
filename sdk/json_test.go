package sdk

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The SDK's codec must write exactly what encoding/json writes and read
// what encoding/json reads, for the five hook types.

// tricky strings exercise every escaping rule.
var tricky = []string{
	"", "plain", `quote " and backslash \`, "<b>&amp;</b>", "tab\tnl\ncr\rbs\bff\f",
	"ctl\x00\x01\x1f\x7f", "é ü 中文 🚀", "line\u2028para\u2029", "bad utf8 \xff\xfe end",
	"truncated \xe2\x82", strings.Repeat("long-ascii-", 40), strings.Repeat(`"q"`, 30),
	"mix 7 bytes", "exactly8", "é\"é\\é",
}

func sampleErrorInputs() []ErrorInput {
	var out []ErrorInput
	for i, s := range tricky {
		out = append(out, ErrorInput{
			Provider: s, Connection: "c/" + s, Model: s, Profile: "apikey", Status: 400 + i,
			Headers:   map[string]string{"x-" + s: s, "retry-after": "3", "z": ""},
			ErrorCode: s, ErrorType: s, Body: s + s,
		})
	}
	return append(out, ErrorInput{}, ErrorInput{Status: -1, Headers: map[string]string{}})
}

func TestEncodingMatchesEncodingJSON(t *testing.T) {
	check := func(name string, got []byte, v any) {
		t.Helper()
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
	for _, in := range sampleErrorInputs() {
		check("ErrorInput", appendErrorInput(nil, &in), in)
	}
	for i, s := range tricky {
		r := Restatement{Status: 500 + i, RetryAfterMS: int64(i) * 1000, RuleID: s}
		check("Restatement", appendRestatement(nil, &r), r)
		d := Decision{Reason: s, Scope: s, CooldownMS: -int64(i), RuleID: s}
		check("Decision", appendDecision(nil, &d), d)
		ri := RequestInfo{Model: s, Path: "/" + s, KeyID: s, Headers: map[string]string{s: s, "a": "b"}}
		check("RequestInfo", appendRequestInfo(nil, &ri), ri)
		a := RequestAction{Model: s, SetHeaders: map[string]string{s: "", "b": s}, RejectStatus: i, RejectMessage: s}
		check("RequestAction", appendRequestAction(nil, &a), a)
	}
	for _, v := range []any{Restatement{}, Decision{}, RequestInfo{}, RequestAction{}} {
		switch v := v.(type) {
		case Restatement:
			check("zero Restatement", appendRestatement(nil, &v), v)
		case Decision:
			check("zero Decision", appendDecision(nil, &v), v)
		case RequestInfo:
			check("zero RequestInfo", appendRequestInfo(nil, &v), v)
		case RequestAction:
			check("zero RequestAction", appendRequestAction(nil, &v), v)
		}
	}
}

// decodeBoth decodes doc with the SDK and with encoding/json and compares.
func decodeBoth[T any](t *testing.T, doc string, decode func([]byte, *T) error) {
	t.Helper()
	var got, want T
	gerr := decode([]byte(doc), &got)
	werr := json.Unmarshal([]byte(doc), &want)
	if (gerr == nil) != (werr == nil) {
		t.Errorf("%T %q: sdk error %v, encoding/json error %v", got, doc, gerr, werr)
		return
	}
	if gerr == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("%T %q:\n got %+v\nwant %+v", got, doc, got, want)
	}
}

func TestDecodingMatchesEncodingJSON(t *testing.T) {
	// Round trips of everything the encoder writes.
	for _, in := range sampleErrorInputs() {
		decodeBoth(t, string(appendErrorInput(nil, &in)), decodeErrorInput)
	}
	docs := []string{
		`{}`, ` { } `, `null`, ` null `,
		`{"provider":"p","status":429,"headers":{"a":"1","b":"2"},"body":"x"}`,
		"{\n\t\"provider\" : \"p\" ,\r\n \"status\" : 0 }",
		`{"unknown":{"nested":[1,2.5e3,-0.1,true,false,null,"s",{"a":[]}]},"provider":"after"}`,
		`{"provider":null,"status":null,"headers":null}`,
		`{"headers":{"a":"1"},"headers":{"b":"2"}}`,
		`{"provider":"a","provider":"b"}`,
		`{"provider":"esc \" \\ \/ \b \f \n \r \t \u00e9 \u4e2d \ud83d\ude80"}`,
		`{"provider":"lone \ud800 surrogate"}`, `{"provider":"lone \udc00 low"}`,
		`{"provider":"pair then \ud83d\u0041"}`,
		`{"provider":"raw é ü 🚀"}`, "{\"provider\":\"bad \xff utf8\"}",
		`{"status":-0}`, `{"status":9223372036854775807}`, `{"status":-9223372036854775808}`,
		`{"status":9223372036854775808}`, `{"status":1.5}`, `{"status":1e2}`, `{"status":01}`,
		`{"status":"429"}`, `{"status":-}`, `{"provider":1}`, `{"headers":{"a":1}}`, `{"headers":[]}`,
		`{"provider":"unterminated}`, `{"provider":"ctl ` + "\x01" + `"}`, `{"provider":"bad \x"}`,
		`{"provider":"bad \u12"}`, `{"provider" "x"}`, `{"provider":"x",}`, `{,}`, `{"a":1 "b":2}`,
		`{"provider":"x"} trailing`, `{"provider":"x"}{}`, `[]`, `"str"`, ``, ` `, `{`, `{"a":[1,]}`,
		`{"a":tru}`, `{"a":nul}`, `{"a":01}`, `{"a":1.}`, `{"a":1e}`, `{"a":.5}`, `{"a":-}`,
	}
	for _, doc := range docs {
		decodeBoth(t, doc, decodeErrorInput)
	}
	for _, doc := range []string{
		`{"status":503,"retry_after_ms":1500,"rule_id":"r"}`, `{"status":503,"retry_after_ms":-1}`,
		`{"status":503,"retry_after_ms":1.5}`,
	} {
		decodeBoth(t, doc, decodeRestatement)
	}
	for _, doc := range []string{
		`{"reason":"quota_exhausted","scope":"connection","cooldown_ms":30000,"rule_id":"x"}`,
		`{"reason":"r","extra":{"deep":[[[]]]}}`, `{"cooldown_ms":"1"}`,
	} {
		decodeBoth(t, doc, decodeDecision)
	}
	for _, doc := range []string{
		`{"model":"m","path":"/v1/chat/completions","key_id":"k","headers":{"x":"y"}}`, `{"headers":{}}`,
	} {
		decodeBoth(t, doc, decodeRequestInfo)
	}
	for _, doc := range []string{
		`{"model":"m","set_headers":{"a":""},"reject_status":403,"reject_message":"no"}`, `{"reject_status":4e2}`,
	} {
		decodeBoth(t, doc, decodeRequestAction)
	}
}

func TestDecodeRejectsDeepNesting(t *testing.T) {
	doc := `{"x":` + strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2) + `}`
	var v ErrorInput
	if err := decodeErrorInput([]byte(doc), &v); err != errDepth {
		t.Fatalf("error = %v, want errDepth", err)
	}
}

// TestPlainRun checks the word-at-a-time scan against a byte loop at every
// length, position and start offset, with one or two special bytes.
func TestPlainRun(t *testing.T) {
	ref := func(s string, i int) int {
		for ; i < len(s); i++ {
			if c := s[i]; c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
				return i
			}
		}
		return len(s)
	}
	specials := []byte{'"', '\\', 0x00, 0x1f, 0x80, 0xff, 0xc3}
	plain := []byte{' ', 'a', 0x7f, 0x21, 0x5b, 0x5d, 0x23, 0x5c + 1}
	for n := 0; n <= 20; n++ {
		for pos := 0; pos <= n; pos++ {
			for _, sp := range specials {
				for _, p := range plain {
					b := []byte(strings.Repeat(string(p), n))
					if pos < n {
						b[pos] = sp
						if pos+3 < n {
							b[pos+3] = '"' // a second special byte after the first
						}
					}
					for start := 0; start <= n; start++ {
						if got, want := plainRun(string(b), start), ref(string(b), start); got != want {
							t.Fatalf("plainRun(%q, %d) = %d, want %d", b, start, got, want)
						}
					}
				}
			}
		}
	}
}

func FuzzCodecMatchesEncodingJSON(f *testing.F) {
	for _, s := range tricky {
		f.Add(s, s+"x", 429, int64(1500))
	}
	f.Fuzz(func(t *testing.T, a, b string, status int, ms int64) {
		in := ErrorInput{Provider: a, Model: b, Status: status, Headers: map[string]string{a: b, b: a}, Body: a + b}
		enc := appendErrorInput(nil, &in)
		want, _ := json.Marshal(in)
		if string(enc) != string(want) {
			t.Fatalf("encode:\n got %s\nwant %s", enc, want)
		}
		decodeBoth(t, string(enc), decodeErrorInput)
		decodeBoth(t, a, decodeErrorInput) // arbitrary text as a document
		d := Decision{Reason: a, Scope: b, CooldownMS: ms, RuleID: a}
		if got, want := appendDecision(nil, &d), must(json.Marshal(d)); string(got) != string(want) {
			t.Fatalf("encode decision:\n got %s\nwant %s", got, want)
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkDecodeErrorInput is the native cost of the guest's input decode.
func BenchmarkDecodeErrorInput(b *testing.B) {
	in := ErrorInput{Provider: "acme", Connection: "acme/main", Model: "acme-large", Profile: "apikey", Status: 429,
		Headers: map[string]string{"content-type": "application/json", "x-acme-quota-remaining": "0", "x-acme-quota-reset": "30"},
		Body:    `{"error":{"message":"quota exhausted"}}`}
	doc := appendErrorInput(nil, &in)
	b.ReportAllocs()
	for b.Loop() {
		var v ErrorInput
		if err := decodeErrorInput(doc, &v); err != nil {
			b.Fatal(err)
		}
	}
}
