package orchestrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// longConversation has 11 messages; message 6 calls a tool, 7 is its result.
// Message 8 carries an unknown field that must survive in the kept tail.
const longConversation = `{"model":"m","stream":true,"temperature":0.2,"messages":[
{"role":"system","content":"You are a travel agent."},
{"role":"user","content":"u1 Plan a trip to Rome"},
{"role":"assistant","content":"a1 Sure, when?"},
{"role":"user","content":[{"type":"text","text":"u2 In May"},{"type":"image_url","image_url":{"url":"data:,"}}]},
{"role":"assistant","content":"a2 Booked flights"},
{"role":"user","content":"u3 What is the weather?"},
{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},
{"role":"tool","tool_call_id":"call_1","content":"22C sunny"},
{"role":"assistant","content":"a4 It is 22C","x_tag":"keep-me"},
{"role":"user","content":"u4 Thanks"},
{"role":"assistant","content":"a5 You are welcome"}]}`

// TestCompactForRelay: the earlier turns are replaced by one summary system
// message; the kept tail starts at a user turn so a tool call and its result
// stay together.
func TestCompactForRelay(t *testing.T) {
	tests := []struct {
		name       string
		keep       int
		tailStart  string // text of the first kept message
		tailLen    int
		inSummary  []string
		notSummary []string
	}{
		{
			// last 4 start at the tool result (7) → back to u3 (5)
			name: "boundary on a tool result", keep: 4, tailStart: "u3 What is the weather?", tailLen: 6,
			inSummary:  []string{"user: u1 Plan a trip to Rome", "assistant: a1 Sure, when?", "user: u2 In May[image_url]", "a2 Booked flights"},
			notSummary: []string{"u3", "get_weather", "22C", "travel agent"},
		},
		{
			// last 5 start at the tool call (6) → back to u3 (5)
			name: "boundary on a tool call", keep: 5, tailStart: "u3 What is the weather?", tailLen: 6,
			inSummary:  []string{"u1 Plan a trip to Rome", "a2 Booked flights"},
			notSummary: []string{"u3", "get_weather"},
		},
		{
			// last 2 start at u4 (9): the whole tool exchange is summarised
			name: "boundary on a user turn", keep: 2, tailStart: "u4 Thanks", tailLen: 2,
			inSummary: []string{"u3 What is the weather?", `assistant called tool get_weather (call_1) with {"city":"Rome"}`,
				"tool result (call_1): 22C sunny", "a4 It is 22C"},
			notSummary: []string{"u4", "a5"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, `rules: [{model: summariser, responses: [{text: "SUMMARY"}]}]`)
			cfg := RelayConfig{Summariser: Target{Name: "summariser"}, KeepLastTurns: tc.keep, MaxSummaryTokens: 200}
			out, summarised, err := CompactForRelay(context.Background(), cfg, u.exec, []byte(longConversation))
			if err != nil || !summarised {
				t.Fatalf("CompactForRelay: summarised %v, err %v", summarised, err)
			}
			r, msgs := decodeRequest(t, out)
			if r.Stream == nil || !*r.Stream || r.Temperature == nil || *r.Temperature != 0.2 {
				t.Errorf("other fields not kept: %s", out)
			}
			if len(msgs) != 2+tc.tailLen {
				t.Fatalf("messages = %d, want system + summary + %d: %s", len(msgs), tc.tailLen, out)
			}
			if msgs[0].Role != "system" || msgs[0].text() != "You are a travel agent." {
				t.Errorf("message 0 = %+v, want the original system message", msgs[0])
			}
			if msgs[1].Role != "system" || msgs[1].text() != "Summary of the earlier conversation: SUMMARY" {
				t.Errorf("message 1 = %s %q, want the summary", msgs[1].Role, msgs[1].text())
			}
			if msgs[2].Role != "user" || msgs[2].text() != tc.tailStart {
				t.Errorf("tail starts with %s %q, want user %q", msgs[2].Role, msgs[2].text(), tc.tailStart)
			}
			// Every tool result in the output follows its tool call.
			calls := map[string]bool{}
			for _, m := range msgs {
				if len(m.ToolCalls) > 0 {
					var tcs []struct{ ID string }
					_ = json.Unmarshal(m.ToolCalls, &tcs)
					for _, c := range tcs {
						calls[c.ID] = true
					}
				}
				if m.Role == "tool" && !calls[m.ToolCallID] {
					t.Errorf("tool result %s kept without its call", m.ToolCallID)
				}
			}
			// The tail is the original tail, byte for byte (x_tag included).
			orig, origMsgs := decodeRequest(t, []byte(longConversation))
			for i := range tc.tailLen {
				a, b := orig.Messages[len(origMsgs)-tc.tailLen+i], r.Messages[2+i]
				var ca, cb bytes.Buffer
				_ = json.Compact(&ca, a)
				_ = json.Compact(&cb, b)
				if ca.String() != cb.String() {
					t.Errorf("tail message %d = %s, want %s", i, b, a)
				}
			}

			sent := u.sentTo("summariser")
			if len(sent) != 1 {
				t.Fatalf("summariser calls = %d", len(sent))
			}
			sr, smsgs := decodeRequest(t, sent[0])
			if sr.MaxTokens != 200 || sr.Stream == nil || *sr.Stream || len(smsgs) != 2 {
				t.Errorf("summariser request = %s", sent[0])
			}
			transcript := smsgs[1].text()
			for _, want := range tc.inSummary {
				if !strings.Contains(transcript, want) {
					t.Errorf("summariser input lacks %q:\n%s", want, transcript)
				}
			}
			for _, not := range tc.notSummary {
				if strings.Contains(transcript, not) {
					t.Errorf("summariser input has kept text %q:\n%s", not, transcript)
				}
			}
		})
	}
}

// TestCompactForRelayUntouched: conversations with at most MinMessages
// messages (default 8), or with no user turn to start a tail at, are
// returned as they are without calling the summariser.
func TestCompactForRelayUntouched(t *testing.T) {
	conv := func(n int) string {
		msgs := []string{`{"role":"system","content":"s"}`}
		for i := 1; i < n; i++ {
			role := "user"
			if i%2 == 0 {
				role = "assistant"
			}
			msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":"m%d"}`, role, i))
		}
		return `{"model":"m","messages":[` + strings.Join(msgs, ",") + `]}`
	}
	agentic := `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"go"}` +
		strings.Repeat(`,{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}`, 5) + `]}`
	tests := []struct {
		name string
		body string
		want bool
	}{
		{"5 messages", conv(5), false},
		{"8 messages (default MinMessages)", conv(8), false},
		{"9 messages", conv(9), true},
		{"agentic run after one user turn", agentic, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, `rules: [{model: summariser, responses: [{text: "SUMMARY"}]}]`)
			cfg := RelayConfig{Summariser: Target{Name: "summariser"}}
			out, summarised, err := CompactForRelay(context.Background(), cfg, u.exec, []byte(tc.body))
			if err != nil || summarised != tc.want {
				t.Fatalf("summarised %v err %v, want %v", summarised, err, tc.want)
			}
			if calls := u.srv.Stats().Total; (calls == 1) != tc.want {
				t.Errorf("summariser calls = %d", calls)
			}
			if !tc.want && !bytes.Equal(out, []byte(tc.body)) {
				t.Errorf("body changed: %s", out)
			}
			if tc.want {
				// 9 messages, keep 4 → tail m5..m8 starts at user m5; m1..m4 summarised.
				_, msgs := decodeRequest(t, out)
				if len(msgs) != 6 || msgs[2].text() != "m5" {
					t.Errorf("messages = %+v", msgs)
				}
			}
		})
	}
}

// TestCompactForRelaySummariserFailure: on a summariser failure the original
// body comes back unchanged with the error.
func TestCompactForRelaySummariserFailure(t *testing.T) {
	tests := []struct{ name, script string }{
		{"503", `rules: [{model: summariser, responses: [{status: 503}]}]`},
		{"empty summary", `rules: [{model: summariser, responses: [{text: "  "}]}]`},
		{"not a completion", `rules: [{model: summariser, responses: [{body: '{"choices":[]}'}]}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, tc.script)
			cfg := RelayConfig{Summariser: Target{Name: "summariser"}}
			out, summarised, err := CompactForRelay(context.Background(), cfg, u.exec, []byte(longConversation))
			if err == nil || summarised {
				t.Fatalf("summarised %v err %v, want an error", summarised, err)
			}
			if !strings.Contains(err.Error(), "summariser summariser") {
				t.Errorf("error %q does not name the summariser", err)
			}
			if !bytes.Equal(out, []byte(longConversation)) {
				t.Errorf("body changed on failure: %s", out)
			}
		})
	}
	if _, _, err := CompactForRelay(context.Background(), RelayConfig{}, nil, []byte(longConversation)); !errors.Is(err, ErrBadConfig) {
		t.Errorf("no summariser: err = %v", err)
	}
}
