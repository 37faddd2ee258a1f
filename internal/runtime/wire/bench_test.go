package wire

import (
	"encoding/json"
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

// agentBody returns a Chat Completions body of about size bytes as a
// coding agent sends it: long message contents holding source files
// (tabs, newlines and quotes escaped), tool results that are JSON inside a
// string, and prose with non-ASCII text.
func agentBody(size int) []byte {
	const code = `package store

import (
	"context"
	"fmt"
)

// Get returns the value of key, or ErrNotFound (« clé absente »).
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if v, ok := s.items[key]; ok && !v.expired(s.now()) {
		return v.data, nil
	}
	return nil, fmt.Errorf("get %q: %w", key, ErrNotFound)
}

`
	const tool = `{"path":"internal/store/store.go","lines":[12,48],"matches":[{"line":17,"text":"s.mu.RLock()"}],"truncated":false}`
	const prose = `The lock is taken for reading only, so concurrent Get calls do not block each other; ` +
		`la méthode renvoie une copie — 読み取りロック — and the caller may keep it. ✓ Tests pass.`
	message := func(fields string, content string) string {
		c, _ := json.Marshal(content)
		return `,{` + fields + `,"content":` + string(c) + `}`
	}
	var b strings.Builder
	b.WriteString(`{"model":"anthropic/claude-sonnet","stream":true,"max_tokens":8192,"messages":[`)
	b.WriteString(message(`"role":"system"`, "You are a careful coding agent.\nUse the tools; never guess file contents.")[1:])
	for i := 0; b.Len() < size-2; i++ {
		switch i % 3 {
		case 0:
			b.WriteString(message(`"role":"user"`, "Here is the file:\n"+strings.Repeat(code, 6)))
		case 1:
			b.WriteString(message(fmt.Sprintf(`"role":"tool","tool_call_id":"call_%d"`, i), tool))
		default:
			b.WriteString(message(`"role":"assistant"`, prose))
		}
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkParseBody reads the routing fields of 1 KB, 100 KB and 1 MB
// bodies: the cost that grows with the body (validation and the walk to
// the routing keys). The plain bodies are one long message of plain words
// (the bench harness's padded body), the agent bodies a coding agent's
// conversation (agentBody).
func BenchmarkParseBody(b *testing.B) {
	const words = "the quick brown fox jumps over the lazy dog "
	bodies := map[string][]byte{}
	for _, size := range []int{1 << 10, 100 << 10, 1 << 20} {
		bodies[fmt.Sprintf("%dKB", size>>10)] = chatBody(size)
		bodies[fmt.Sprintf("agent/%dKB", size>>10)] = agentBody(size)
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
