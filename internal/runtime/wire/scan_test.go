package wire

import (
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
