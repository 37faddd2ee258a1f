package engine

import (
	"encoding/json"
	"strings"
	"testing"
)

// decodedMessage is upstreamMessage's reading of a JSON body done with
// encoding/json, the reference the one-pass scan must agree with.
func decodedMessage(body string) string {
	b := strings.TrimSpace(body)
	if b == "" {
		return ""
	}
	switch b[0] {
	case '{':
		return decodedObjectMessage([]byte(b))
	case '[':
		var arr []json.RawMessage
		if json.Unmarshal([]byte(b), &arr) == nil && len(arr) > 0 {
			return decodedObjectMessage(arr[0])
		}
	}
	return ""
}

func decodedObjectMessage(raw []byte) string {
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(raw, &env) != nil {
		return ""
	}
	str := func(raw json.RawMessage) string {
		var s string
		if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	}
	if len(env.Error) > 0 {
		var s string
		if json.Unmarshal(env.Error, &s) == nil {
			return s
		}
		var inner struct {
			Message json.RawMessage `json:"message"`
		}
		if json.Unmarshal(env.Error, &inner) == nil {
			if s := str(inner.Message); s != "" {
				return s
			}
		}
	}
	if s := str(env.Message); s != "" {
		return s
	}
	return str(env.Detail)
}

// scannedMessage is upstreamMessage's reading of a JSON body by the scan.
func scannedMessage(body string) string {
	b := strings.TrimSpace(body)
	if b == "" {
		return ""
	}
	switch b[0] {
	case '{':
		return jsonMessage(b)
	case '[':
		if first, ok := scanFirstElement(b); ok && first != "" {
			return jsonMessage(first)
		}
	}
	return ""
}

// messageBodies are error bodies the providers send and the JSON corner
// cases the scan must judge as encoding/json does.
var messageBodies = []string{
	`{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","code":"rate_limit_exceeded"}}`,
	`{"error":{"message":"用户额度不足, 剩余额度: $0.000000 (request id: 20250601120000123)","type":"new_api_error"}}`,
	`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
	`[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]`,
	`{"error":"model not found"}`, `{"message":"plain"}`, `{"detail":"Not Found"}`, `{"detail":[{"msg":"x"}]}`,
	`{"error":null,"message":"x"}`, `{"error":1,"message":"x"}`, `{"error":[],"message":"x"}`, `{"error":true,"detail":"d"}`,
	`{"error":{"message":null},"message":"outer"}`, `{"error":{"message":7},"detail":"d"}`, `{"error":{},"message":"m"}`,
	`{"Error":{"MESSAGE":"folded"}}`, `{"ERROR":"a","error":"b"}`, `{"message":"a","message":"b"}`, `{"mess\u0061ge":"escaped key"}`,
	`{"\u212Aey":1,"message":"kelvin"}`, `{"message":"esc \"q\" \\ \/ \b\f\n\r\t \u00e9 \ud83d\ude00 \ud800"}`,
	"{\"message\":\"bad utf8 \xff\xfe\"}", "{\"message\":\"ctl \x01\"}", `{"message":"x"} trailing`, `{"message":"x"}   `,
	`{"message":"x",}`, `{"message" "x"}`, `{,}`, `{}`, `[]`, `[null]`, `["s"]`, `[{"message":"first"},{"message":"second"}]`,
	`[{"message":"first"},]`, `{"a":-0.5e+3,"b":01,"message":"n"}`, `{"a":-0.5e+3,"message":"n"}`, `{"a":1.,"message":"n"}`,
	`{"a":-,"message":"n"}`, `{"a":tru,"message":"n"}`, `{"a":nullx,"message":"n"}`, `{"a":[1,[2,{"b":{}}]],"message":"deep"}`,
	`{"message":"\u12"}`, `{"message":"\x"}`, `{"message":"unterminated}`, "{\"message\":\"x\"}\x00",
	`{"error":{"message":"inner","message":"inner2"},"error":"outer wins"}`, `{"error":"\u0000nul"}`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	`{"message":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `,"detail":"at depth"}`,
}

// TestJSONMessageMatchesDecoding: the one-pass scan reads the same
// message as decoding with encoding/json, for provider bodies and the
// JSON corner cases (duplicate and case-folded names, escapes, invalid
// UTF-8, invalid JSON, nesting at and past encoding/json's bound).
func TestJSONMessageMatchesDecoding(t *testing.T) {
	for _, body := range messageBodies {
		if got, want := scannedMessage(body), decodedMessage(body); got != want {
			t.Errorf("body %.80q: scan %q, decoding %q", body, got, want)
		}
	}
	if got := upstreamMessage(messageBodies[0]); got != "Rate limit reached for gpt-4o" {
		t.Errorf("upstreamMessage: %q", got)
	}
}

// FuzzJSONMessage: for any body, the one-pass scan reads the message
// encoding/json decoding reads.
func FuzzJSONMessage(f *testing.F) {
	for _, body := range messageBodies {
		if len(body) < 1000 {
			f.Add(body)
		}
	}
	f.Fuzz(func(t *testing.T, body string) {
		if got, want := scannedMessage(body), decodedMessage(body); got != want {
			t.Fatalf("body %q: scan %q, decoding %q", body, got, want)
		}
	})
}
