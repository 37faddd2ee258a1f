package translate

import (
	"path/filepath"
	"testing"
)

// Golden tests of the Responses API translation: every request fixture
// under testdata/responses/requests to Chat Completions and to Anthropic
// Messages, and every recorded Chat Completions and Anthropic answer and
// stream back to the Responses API (answering rsGoldenRequest).

// rsGoldenRequest is the request the recorded answers answer.
const rsGoldenRequest = "testdata/responses/requests/sdk_full.json"

func parseRS(t *testing.T, path string) *ResponsesCall {
	t.Helper()
	c, err := ParseResponses(readFile(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGoldenResponsesRequests(t *testing.T) {
	for _, f := range fixtures(t, "responses/requests") {
		c := parseRS(t, f)
		t.Run("responses_to_chat/"+baseName(f), func(t *testing.T) {
			out, err := c.ChatRequest(openaiModel)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("responses_to_chat", "requests", filepath.Base(f)), indent(t, out))
		})
		t.Run("responses_to_anthropic/"+baseName(f), func(t *testing.T) {
			out, err := c.AnthropicRequest(anthropicModel)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("responses_to_anthropic", "requests", filepath.Base(f)), indent(t, out))
		})
	}
}

func TestGoldenResponsesAnswers(t *testing.T) {
	c := parseRS(t, rsGoldenRequest)
	for _, f := range fixtures(t, "openai/responses") {
		t.Run("chat_to_responses/"+baseName(f), func(t *testing.T) {
			out, err := c.ChatResponse(readFile(t, f), "")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("chat_to_responses", "responses", filepath.Base(f)), indent(t, out))
		})
	}
	for _, f := range fixtures(t, "anthropic/responses") {
		t.Run("anthropic_to_responses/"+baseName(f), func(t *testing.T) {
			out, err := c.anthropicResponse(readFile(t, f), "", fixedNow)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("anthropic_to_responses", "responses", filepath.Base(f)), indent(t, out))
		})
	}
}

// newAn2RS returns the Anthropic→Responses stream translator on the fixed
// clock.
func newAn2RS(c *ResponsesCall, model string) Translator {
	return Chain(newA2O(model), c.NewChatStream(model))
}

func TestGoldenResponsesStreams(t *testing.T) {
	c := parseRS(t, rsGoldenRequest)
	for _, f := range fixtures(t, "openai/streams") {
		t.Run("chat_to_responses/"+baseName(f), func(t *testing.T) {
			out := runStream(t, c.NewChatStream(""), readSSE(t, f))
			checkGolden(t, filepath.Join("chat_to_responses", "streams", filepath.Base(f)), writeSSE(out))
		})
	}
	for _, f := range fixtures(t, "anthropic/streams") {
		t.Run("anthropic_to_responses/"+baseName(f), func(t *testing.T) {
			out := runStream(t, newAn2RS(c, ""), readSSE(t, f))
			checkGolden(t, filepath.Join("anthropic_to_responses", "streams", filepath.Base(f)), writeSSE(out))
		})
	}
}
