package orchestrate

import (
	"encoding/json"
	"testing"
)

func TestAssistantText(t *testing.T) {
	tests := []struct {
		name    string
		resp    string
		want    string
		wantErr bool
	}{
		{"string", `{"choices":[{"message":{"role":"assistant","content":"hi"}}]}`, "hi", false},
		{"parts", `{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{}},{"type":"text","text":"b"}]}}]}`, "ab", false},
		{"first choice only", `{"choices":[{"message":{"content":"one"}},{"message":{"content":"two"}}]}`, "one", false},
		{"null content (tool call)", `{"choices":[{"message":{"content":null,"tool_calls":[]}}]}`, "", false},
		{"no choices", `{"choices":[]}`, "", true},
		{"error body", `{"error":{"message":"x"}}`, "", true},
		{"not json", `nope`, "", true},
		{"number content", `{"choices":[{"message":{"content":5}}]}`, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AssistantText([]byte(tc.resp))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("text = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestUsageSumNestedAndFloat(t *testing.T) {
	var u usageSum
	u.add([]byte(`{"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4},"cost":0.5,"note":"a"}}`))
	u.add([]byte(`{"usage":null}`))
	u.add([]byte(`{"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":1},"cost":0.25,"note":"b"}}`))
	out, err := finish([]byte(`{"id":"x","model":"up","usage":{"prompt_tokens":5}}`), "client", &u)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ID    string `json:"id"`
		Model string `json:"model"`
		Usage struct {
			Prompt     int     `json:"prompt_tokens"`
			Completion int     `json:"completion_tokens"`
			Cost       float64 `json:"cost"`
			Note       string  `json:"note"`
			Details    struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "x" || got.Model != "client" || got.Usage.Prompt != 15 || got.Usage.Completion != 5 ||
		got.Usage.Details.Cached != 5 || got.Usage.Cost != 0.75 || got.Usage.Note != "a" {
		t.Fatalf("finish = %s", out)
	}
}

func TestJudgePromptTemplate(t *testing.T) {
	answers := []string{"alpha", " beta \n"}
	if got, want := judgePrompt("N={{count}}\n{{answers}}\nend", answers), "N=2\nAnswer 1:\nalpha\n\nAnswer 2:\nbeta\nend"; got != want {
		t.Fatalf("template = %q, want %q", got, want)
	}
	if got, want := judgePrompt("Pick one.", answers), "Pick one.\n\nAnswer 1:\nalpha\n\nAnswer 2:\nbeta"; got != want {
		t.Fatalf("no placeholder = %q, want %q", got, want)
	}
}
