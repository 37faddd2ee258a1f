package provider

import (
	"bytes"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// ValidAnswer answers, in one pass, what EmptyAnswer and the whole-body
// JSON check answer (docs/resilience.md §9): for each exchange of each
// kind, an empty answer is empty and valid, a text answer valid and not
// empty, a broken body invalid — the embeddings exchange, which has no
// answer reader, only checked.
func TestValidAnswerMatchesEmptyAnswerAndValid(t *testing.T) {
	bodies := []string{
		`{"choices":[{"message":{"role":"assistant","content":""}}]}`,
		`{"choices":[{"message":{"role":"assistant","content":"hi"}}]}`,
		`{"content":[{"type":"thinking","thinking":"t"}]}`,
		`{"content":[{"type":"text","text":"hi"}]}`,
		`{"output":[{"type":"reasoning"}]}`,
		`{"output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}]}`,
		`{"data":[{"embedding":[0.1]}]}`,
		`{"choices":[{"message":{"content":""}}]`,
		`{"content":[{"type":"text","text":""}],}`,
	}
	for _, kind := range []string{KindOpenAI, KindAnthropic} {
		a, ok := ForKind(kind)
		if !ok {
			t.Fatalf("no adapter for %s", kind)
		}
		for f := wire.Format(0); f < wire.NumFormats; f++ {
			ex := a.Exchange(f)
			if ex == nil {
				continue
			}
			for _, b := range bodies {
				body := []byte(b)
				empty, ok := ex.ValidAnswer(body)
				wantOK := wire.Valid(body) && bytes.HasPrefix(body, []byte("{"))
				if ok != wantOK || ok && empty != ex.EmptyAnswer(body) {
					t.Errorf("%s %s: ValidAnswer(%s) = %v, %v; want empty %v, valid %v", kind, f, b, empty, ok, ex.EmptyAnswer(body), wantOK)
				}
			}
		}
	}
}
