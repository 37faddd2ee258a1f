package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, body string
		model      string
		stream     bool
		field      string
	}{
		{"ok", `{"model":"a/b","messages":[{"role":"user","content":"hi"}]}`, "a/b", false, ""},
		{"stream and nesting", `{"messages":[{"content":"{\"model\":\"x\"}"}],"stream":true,"model":"m","tools":[{"a":[1,2,{"b":"]"}]}]}`, "m", true, ""},
		{"escaped model", `{"model":"a\u002fb","messages":[1]}`, "a/b", false, ""},
		{"stream false", `{"model":"m","messages":[1],"stream":false}`, "m", false, ""},
		{"not json", `{"model":`, "", false, "body"},
		{"not an object", `["model"]`, "", false, "body"},
		{"missing model", `{"messages":[1]}`, "", false, "model"},
		{"empty model", `{"model":"","messages":[1]}`, "", false, "model"},
		{"model not a string", `{"model":3,"messages":[1]}`, "", false, "model"},
		{"missing messages", `{"model":"m"}`, "", false, "messages"},
		{"empty messages", `{"model":"m","messages":[ ]}`, "", false, "messages"},
		{"messages not array", `{"model":"m","messages":"hi"}`, "", false, "messages"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.body))
			if tc.field != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Fatalf("want a FieldError on %q, got %v", tc.field, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Model != tc.model || r.Stream != tc.stream {
				t.Fatalf("got model %q stream %v", r.Model, r.Stream)
			}
		})
	}
}

func TestRewriteModelChangesOnlyTheModel(t *testing.T) {
	body := []byte(`{"messages":[{"role":"user","content":"model"}], "model" : "prov/gpt-x" ,"stream":true}`)
	r, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	out := r.RewriteModel(body, `gpt-"x"`)
	var got, want map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("rewritten body invalid: %v: %s", err, out)
	}
	_ = json.Unmarshal(body, &want)
	want["model"] = `gpt-"x"`
	if g, _ := json.Marshal(got); string(g) != string(must(json.Marshal(want))) {
		t.Fatalf("rewrite changed more than the model:\n%s", out)
	}
	if string(body) != `{"messages":[{"role":"user","content":"model"}], "model" : "prov/gpt-x" ,"stream":true}` {
		t.Fatal("the original body was modified")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func BenchmarkParseAndRewrite(b *testing.B) {
	body := []byte(`{"model":"openai/gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Summarise the history of the lighthouse in three sentences."}],"temperature":0.2,"stream":true}`)
	b.ReportAllocs()
	for b.Loop() {
		r, err := Parse(body)
		if err != nil {
			b.Fatal(err)
		}
		_ = r.RewriteModel(body, "gpt-4o-mini")
	}
}

// TestRewriteModelKeepsUnknownFields: a same-format route passes the
// newest client fields through byte for byte (only the model value
// changes), whatever their spacing: Claude Code's system-role message,
// adaptive thinking, output_config, context_management, cache_control and
// deferred tools; Codex's namespace tools, include, prompt_cache_key and
// client_metadata.
func TestRewriteModelKeepsUnknownFields(t *testing.T) {
	bodies := []struct {
		parse func([]byte) (Request, error)
		body  string
	}{
		{Parse, `{"model":"claude-opus-5-5","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},{"role":"system","content":[{"type":"text","text":"# Environment"}]}],
 "system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.328"}],"tools":[{"name":"DeferredToolPlaceholder","input_schema":{"type":"object"},"defer_loading":true}],
 "metadata":{"user_id":"{\"device_id\":\"d8\",\"session_id\":\"42\"}"},"max_tokens":128000,"thinking":{"type":"adaptive","display":"omitted"},
 "context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},"output_config":{"effort":"medium"},"stream":true}`},
		{ParseResponses, `{"model":"gpt-5.2","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"x"}]}],"tools":[{"type":"namespace","name":"multi_agent_v1","tools":[]},{"type":"web_search","external_web_access":false}],
 "tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"summary":"auto"},"store":false,"stream":true,"include":["reasoning.encrypted_content"],"prompt_cache_key":"01a2","client_metadata":{"thread_id":"01a2"}}`},
	}
	for _, b := range bodies {
		body := []byte(b.body)
		r, err := b.parse(body)
		if err != nil {
			t.Fatal(err)
		}
		quoted := []byte(`"` + r.Model + `"`)
		i := bytes.Index(body, quoted)
		want := append(append(append([]byte{}, body[:i]...), `"routed-model"`...), body[i+len(quoted):]...)
		if got := r.RewriteModel(body, "routed-model"); !bytes.Equal(got, want) {
			t.Errorf("rewrite changed more than the model:\n got %s\nwant %s", got, want)
		}
	}
}

// TestRoutingKeysMeanOneThing replays the probe bodies of issue 19 (items
// 5 and 6): a routing key written with escapes, in another case or twice
// made the gateway route on one value while the upstream read another.
// Each is refused with a FieldError naming the key, on both parsers.
func TestRoutingKeysMeanOneThing(t *testing.T) {
	cases := []struct {
		name, body, field string
	}{
		{"escaped stream beside stream", `{"model":"m","messages":[1],"input":"x","stream":true,"str\u0065am":false}`, "stream"},
		{"escaped model beside model", `{"model":"allowed","mod\u0065l":"other","messages":[1],"input":"x"}`, "model"},
		{"escaped model before model", `{"mod\u0065l":"other","model":"allowed","messages":[1],"input":"x"}`, "model"},
		{"lone escaped model", `{"\u006dodel":"other","messages":[1],"input":"x"}`, "model"},
		{"duplicate model", `{"model":"allowed","messages":[1],"input":"x","model":"other"}`, "model"},
		{"duplicate stream", `{"model":"m","stream":false,"messages":[1],"input":"x","stream":true}`, "stream"},
		{"other case", `{"model":"m","Stream":true,"messages":[1],"input":"x"}`, "stream"},
		{"unicode fold", `{"model":"m","ſtream":true,"messages":[1],"input":"x"}`, "stream"},
		{"kelvin sign", `{"model":"m","bac` + "\u212a" + `ground":true,"messages":[1],"input":"x"}`, "background"},
		{"duplicate messages", `{"model":"m","messages":[],"input":"x","messages":[1]}`, "messages"},
		{"escaped messages", `{"model":"m","m\u0065ssages":[1],"messages":[1],"input":"x"}`, "messages"},
		{"duplicate input", `{"model":"m","messages":[1],"input":"","input":"x"}`, "input"},
		{"escaped background", `{"model":"m","messages":[1],"input":"x","b\u0061ckground":true}`, "background"},
		{"stream as a string", `{"model":"m","messages":[1],"input":"x","stream":"true"}`, "stream"},
		{"stream as a number", `{"model":"m","messages":[1],"input":"x","stream":1}`, "stream"},
		{"background as a string", `{"model":"m","messages":[1],"input":"x","background":"yes"}`, "background"},
		{"model with a control byte", `{"model":"a\u0000b","messages":[1],"input":"x"}`, "model"},
		{"model with a lone surrogate", `{"model":"a\ud800","messages":[1],"input":"x"}`, "model"},
	}
	for _, tc := range cases {
		for _, parse := range []struct {
			name string
			fn   func([]byte) (Request, error)
		}{{"Parse", Parse}, {"ParseResponses", ParseResponses}} {
			t.Run(tc.name+"/"+parse.name, func(t *testing.T) {
				r, err := parse.fn([]byte(tc.body))
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Fatalf("want a FieldError on %q, got %v (model %q, stream %v)", tc.field, err, r.Model, r.Stream)
				}
			})
		}
	}
	// Keys that only look alike are other keys, and escapes elsewhere
	// (values, other keys, nested objects) are fine.
	for _, body := range []string{
		`{"model":"m","messages":[{"model":"x","stream":true}],"models":1,"streams":true,"str\u0065amer":1}`,
		`{"model":"caf\u00e9/\u6a21\u578b","messages":[1],"n\u0061me":"x"}`,
	} {
		r, err := Parse([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var doc struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		if r.Model != doc.Model || r.Stream != doc.Stream {
			t.Fatalf("%s: scanner read %q/%v, encoding/json %q/%v", body, r.Model, r.Stream, doc.Model, doc.Stream)
		}
	}
}

// ParseFor checks each endpoint's required field (Responses and embeddings
// "input", legacy completions "prompt", the others "messages") and refuses
// a stream where the endpoint answers none.
func TestParseForEndpoints(t *testing.T) {
	cases := []struct {
		f     Format
		body  string
		field string
	}{
		{FormatEmbeddings, `{"model":"m","input":["a","b"]}`, ""},
		{FormatEmbeddings, `{"model":"m","input":[ ]}`, "input"},
		{FormatEmbeddings, `{"model":"m","input":"a","stream":true}`, "stream"},
		{FormatCompletions, `{"model":"m","prompt":"hi","stream":true}`, ""},
		{FormatCompletions, `{"model":"m","prompt":""}`, "prompt"},
		{FormatCompletions, `{"model":"m","prompt":"a","Prompt":"b"}`, "prompt"},
		{FormatCountTokens, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, ""},
		{FormatCountTokens, `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`, "stream"},
		{FormatCountTokens, `{"model":"m"}`, "messages"},
		{FormatResponses, `{"model":"m","input":"x","stream":true}`, ""},
	}
	for _, tc := range cases {
		_, err := ParseFor(tc.f, []byte(tc.body))
		var fe *FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s %s: %v", tc.f, tc.body, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%s %s: %v, want a FieldError on %q", tc.f, tc.body, err, tc.field)
		}
	}
	if !FormatCountTokens.Anthropic() || FormatEmbeddings.Anthropic() || !FormatMessages.Anthropic() {
		t.Error("count_tokens and messages answer errors in the Anthropic shape, the others in OpenAI's")
	}
	if got := (&APIError{Status: 400, Type: "invalid_request_error", Message: "x"}).Body(FormatCountTokens); !bytes.Contains(got, []byte(`"type":"error"`)) {
		t.Errorf("count_tokens error shape %s", got)
	}
}

// The scanner counts the request's tools once, while it reads the body:
// the elements of the top-level "tools" array (Chat Completions, Messages
// and Responses alike), else of the legacy "functions" array; nested
// "tools" keys and non-array values count nothing.
func TestParseCountsTools(t *testing.T) {
	cases := []struct {
		name, body string
		tools      int
	}{
		{"none", `{"model":"m","messages":[1]}`, 0},
		{"chat tools", `{"model":"m","messages":[1],"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{"x":{"enum":["[","]",","]}}}}},{"type":"function","function":{"name":"b"}}]}`, 2},
		{"anthropic tools", `{"model":"m","max_tokens":5,"tools":[ {"name":"a","input_schema":{}} , {"name":"b","input_schema":{}}, {"name":"c","input_schema":{}} ],"messages":[1]}`, 3},
		{"empty tools", `{"model":"m","messages":[1],"tools":[ ]}`, 0},
		{"legacy functions", `{"model":"m","messages":[1],"functions":[{"name":"a"}]}`, 1},
		{"tools win over functions", `{"model":"m","functions":[{"name":"a"}],"messages":[1],"tools":[{"name":"x"},{"name":"y"}]}`, 2},
		{"nested tools do not count", `{"model":"m","messages":[{"content":"x","tools":[1,2,3]}]}`, 0},
		{"not an array", `{"model":"m","messages":[1],"tools":"many"}`, 0},
	}
	for _, tc := range cases {
		r, err := Parse([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Tools != tc.tools {
			t.Errorf("%s: Tools = %d, want %d", tc.name, r.Tools, tc.tools)
		}
	}
	r, err := ParseResponses([]byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"a"},{"type":"web_search"}]}`))
	if err != nil || r.Tools != 2 {
		t.Fatalf("responses: %d %v, want 2 tools", r.Tools, err)
	}
}
