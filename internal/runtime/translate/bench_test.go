package translate

import (
	"path/filepath"
	"testing"
)

// benchStream measures the per-event translation cost: one op is one
// upstream event (ns/op = ns/event, allocs/op = allocs/event); a fresh
// Translator starts each pass over the recorded stream.
func benchStream(b *testing.B, newTr func() Translator, path string) {
	events := parseSSE(mustRead(b, path))
	b.ReportAllocs()
	var tr Translator
	bytesOut := 0
	i := 0
	for b.Loop() {
		k := i % len(events)
		if k == 0 {
			if tr != nil {
				tr.Finish()
			}
			tr = newTr()
		}
		out, err := tr.Event(events[k])
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range out {
			bytesOut += len(e.Data)
		}
		i++
	}
	b.ReportMetric(float64(bytesOut)/float64(i), "outB/event")
}

func mustRead(b *testing.B, path string) []byte {
	b.Helper()
	data, err := readFileErr(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

func BenchmarkAnthropicToOpenAIStream(b *testing.B) {
	for _, name := range []string{"text.sse", "tool_use.sse", "thinking.sse"} {
		b.Run(name, func(b *testing.B) {
			benchStream(b, func() Translator { return NewAnthropicToOpenAIStream("") }, filepath.Join("testdata", "anthropic", "streams", name))
		})
	}
}

func BenchmarkOpenAIToAnthropicStream(b *testing.B) {
	for _, name := range []string{"text.sse", "tool_calls.sse", "reasoning.sse"} {
		b.Run(name, func(b *testing.B) {
			benchStream(b, func() Translator { return NewOpenAIToAnthropicStream("") }, filepath.Join("testdata", "openai", "streams", name))
		})
	}
}

func BenchmarkRequests(b *testing.B) {
	oa := mustRead(b, "testdata/openai/requests/tools.json")
	an := mustRead(b, "testdata/anthropic/requests/tools.json")
	b.Run("openai_to_anthropic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := OpenAIToAnthropicRequest(oa, "m"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("anthropic_to_openai", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := AnthropicToOpenAIRequest(an, "m"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkChatToResponsesStream is the per-event cost of answering a
// Responses API client from a Chat Completions upstream.
func BenchmarkChatToResponsesStream(b *testing.B) {
	c, err := ParseResponses(mustRead(b, "testdata/responses/requests/sdk_full.json"))
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"text.sse", "tool_calls.sse", "reasoning.sse"} {
		b.Run(name, func(b *testing.B) {
			benchStream(b, func() Translator { return c.NewChatStream("") }, filepath.Join("testdata", "openai", "streams", name))
		})
	}
}

// BenchmarkAnthropicToResponsesStream is the per-event cost of the
// composed Anthropic → Chat Completions → Responses translator.
func BenchmarkAnthropicToResponsesStream(b *testing.B) {
	c, err := ParseResponses(mustRead(b, "testdata/responses/requests/sdk_full.json"))
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"text.sse", "tool_use.sse", "thinking.sse"} {
		b.Run(name, func(b *testing.B) {
			benchStream(b, func() Translator { return c.NewAnthropicStream("") }, filepath.Join("testdata", "anthropic", "streams", name))
		})
	}
}

func BenchmarkResponsesRequests(b *testing.B) {
	body := mustRead(b, "testdata/responses/requests/codex.json")
	b.Run("to_chat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := ParseResponses(body)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.ChatRequest("m"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("to_anthropic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := ParseResponses(body)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.AnthropicRequest("m"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
