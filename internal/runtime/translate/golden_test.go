package translate

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Golden tests: every recorded fixture under testdata/{openai,anthropic}
// is translated and compared with testdata/golden (go test -update
// rewrites them; review the diff). The mapping tests beside these assert
// the individual rules, so a wrong golden cannot hide a broken rule.

const (
	anthropicModel = "claude-sonnet-4-5-20250929"
	openaiModel    = "gpt-4o-2024-08-06"
)

func TestGoldenRequests(t *testing.T) {
	for _, f := range fixtures(t, "openai/requests") {
		t.Run("openai_to_anthropic/"+baseName(f), func(t *testing.T) {
			out, err := OpenAIToAnthropicRequest(readFile(t, f), anthropicModel)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("openai_to_anthropic", "requests", filepath.Base(f)), indent(t, out))
		})
	}
	for _, f := range fixtures(t, "anthropic/requests") {
		t.Run("anthropic_to_openai/"+baseName(f), func(t *testing.T) {
			out, err := AnthropicToOpenAIRequest(readFile(t, f), openaiModel)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("anthropic_to_openai", "requests", filepath.Base(f)), indent(t, out))
		})
	}
}

func TestGoldenResponses(t *testing.T) {
	for _, f := range fixtures(t, "anthropic/responses") {
		t.Run("anthropic_to_openai/"+baseName(f), func(t *testing.T) {
			out, err := anthropicToOpenAIResponse(readFile(t, f), "", fixedNow)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("anthropic_to_openai", "responses", filepath.Base(f)), indent(t, out))
		})
	}
	for _, f := range fixtures(t, "openai/responses") {
		t.Run("openai_to_anthropic/"+baseName(f), func(t *testing.T) {
			out, err := OpenAIToAnthropicResponse(readFile(t, f), "")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("openai_to_anthropic", "responses", filepath.Base(f)), indent(t, out))
		})
	}
}

// newA2O returns the Anthropic→OpenAI stream translator on the fixed clock.
func newA2O(model string) Translator {
	tr := NewAnthropicToOpenAIStream(model).(*anthropicToOpenAI)
	tr.now = func() time.Time { return fixedNow }
	return tr
}

func TestGoldenStreams(t *testing.T) {
	for _, f := range fixtures(t, "anthropic/streams") {
		t.Run("anthropic_to_openai/"+baseName(f), func(t *testing.T) {
			out := runStream(t, newA2O(""), readSSE(t, f))
			checkGolden(t, filepath.Join("anthropic_to_openai", "streams", filepath.Base(f)), writeSSE(out))
		})
	}
	for _, f := range fixtures(t, "openai/streams") {
		t.Run("openai_to_anthropic/"+baseName(f), func(t *testing.T) {
			out := runStream(t, NewOpenAIToAnthropicStream(""), readSSE(t, f))
			checkGolden(t, filepath.Join("openai_to_anthropic", "streams", filepath.Base(f)), writeSSE(out))
		})
	}
}

// statusOf reads the HTTP status from an error fixture name (429_xxx.json).
func statusOf(t *testing.T, path string) int {
	t.Helper()
	s, _, _ := strings.Cut(filepath.Base(path), "_")
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("error fixture %s must start with the status", path)
	}
	return n
}

func TestGoldenErrors(t *testing.T) {
	for _, f := range fixtures(t, "anthropic/errors") {
		t.Run("anthropic_to_openai/"+baseName(f), func(t *testing.T) {
			out := ErrorToOpenAI(statusOf(t, f), readFile(t, f))
			checkGolden(t, filepath.Join("anthropic_to_openai", "errors", baseName(f)+".json"), indent(t, out))
		})
	}
	for _, f := range fixtures(t, "openai/errors") {
		t.Run("openai_to_anthropic/"+baseName(f), func(t *testing.T) {
			out := ErrorToAnthropic(statusOf(t, f), readFile(t, f))
			checkGolden(t, filepath.Join("openai_to_anthropic", "errors", baseName(f)+".json"), indent(t, out))
		})
	}
}
