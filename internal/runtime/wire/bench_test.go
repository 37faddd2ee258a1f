package wire

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// chatBody returns a Chat Completions body of about size bytes: a system
// prompt, a tool with a nested schema, and user and assistant turns whose
// text has escapes (newlines, quotes) and non-ASCII letters, as an agent's
// long conversation has.
func chatBody(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"openai/gpt-4o-mini","stream":false,"temperature":0.2,"max_tokens":1024,`)
	b.WriteString(`"tools":[{"type":"function","function":{"name":"search","description":"Search the archive.","parameters":{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":50},"boost":{"type":"number","default":1.5e-3}},"required":["query"]}}}],`)
	b.WriteString(`"messages":[{"role":"system","content":"You are terse.\nAnswer in \"plain\" text."}`)
	turn := `,{"role":"user","content":"Summarise the history of the lighthouse at Cap Fréhel (灯台) in three sentences.\nKeep \"names\" as written; cite 2 sources."},{"role":"assistant","content":"The first tower was lit in 1650.\nIt was rebuilt in 1950 after the war; it stands 103 m above the sea.","tool_calls":null}`
	for i := 0; b.Len()+len(turn)+2 < size; i++ {
		b.WriteString(turn)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkParseBody reads the routing fields of 1 KB, 100 KB and 1 MB
// bodies: the cost that grows with the body (validation and the walk to
// the routing keys). The plain bodies are one long message of plain words
// (the bench harness's padded body).
func BenchmarkParseBody(b *testing.B) {
	const words = "the quick brown fox jumps over the lazy dog "
	bodies := map[string][]byte{}
	for _, size := range []int{1 << 10, 100 << 10, 1 << 20} {
		bodies[fmt.Sprintf("%dKB", size>>10)] = chatBody(size)
		bodies[fmt.Sprintf("plain/%dKB", size>>10)] = []byte(`{"model":"bench/bench-model","messages":[{"role":"user","content":"` +
			strings.Repeat(words, size/len(words)) + `"}]}`)
	}
	for _, name := range slices.Sorted(maps.Keys(bodies)) {
		body := bodies[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSpliceModel is the model rewrite of a same-format route on 1 KB
// and 1 MB bodies: the splice (no copy) against the rewrite into a new
// body.
func BenchmarkSpliceModel(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		body := chatBody(size)
		r, err := Parse(body)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("splice/%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				_ = r.SpliceModel(body, "gpt-4o-mini")
			}
		})
		b.Run(fmt.Sprintf("rewrite/%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				_ = r.RewriteModel(body, "gpt-4o-mini")
			}
		})
	}
}
