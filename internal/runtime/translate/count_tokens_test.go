package translate

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/png"
	"math"
	"path/filepath"
	"testing"
)

// tokenRefs are the real tokenizer counts of the text pieces of each
// Anthropic request fixture (countTokensText), measured with js-tiktoken
// 1.0.21: {o200k_base, cl100k_base}. Reproduce with
// BW_DUMP_TOKEN_TEXT=DIR go test -run TestDumpCountTokensText and
// getEncoding(...).encode(piece).length summed per fixture.
var tokenRefs = map[string][2]int{
	"claude_code.json":          {416, 412},
	"mixed_languages.json":      {200, 229},
	"system_blocks_images.json": {21, 21},
	"system_multiturn.json":     {24, 24},
	"thinking_any.json":         {42, 41},
	"tools.json":                {166, 167},
}

// maxTextTokenError is the documented bound of TextTokens against both
// tokenizers on the fixtures (docs/compatibility.md).
const maxTextTokenError = 0.15

func TestTextTokensAgainstTokenizers(t *testing.T) {
	for _, f := range fixtures(t, "anthropic/requests") {
		name := filepath.Base(f)
		ref, ok := tokenRefs[name]
		if !ok {
			t.Fatalf("no reference count for fixture %s: measure it (see tokenRefs)", name)
		}
		pieces, err := countTokensText(readFile(t, f))
		if err != nil {
			t.Fatal(err)
		}
		est := 0
		for _, p := range pieces {
			est += TextTokens(p)
		}
		for i, enc := range []string{"o200k_base", "cl100k_base"} {
			e := float64(est-ref[i]) / float64(ref[i])
			t.Logf("%-26s %-11s estimate %4d real %4d error %+5.1f%%", name, enc, est, ref[i], 100*e)
			if math.Abs(e) > maxTextTokenError {
				t.Errorf("%s: estimate %d vs %s %d: error %.0f%% exceeds the documented %.0f%%", name, est, enc, ref[i], 100*e, 100*maxTextTokenError)
			}
		}
	}
}

func TestTextTokensRules(t *testing.T) {
	cases := []struct {
		s    string
		want int
	}{
		{"", 0},
		{"hello", 1},                // a word up to 10 letters
		{"internationalization", 2}, // 20 letters
		{"hi there", 2},             // the space joins the next word
		{"a, b.", 4},                // a , b .
		{"2026", 2},                 // digits by 3
		{"    x", 2},                // 3 extra spaces: 1, then x
		{"日本語", 3},                  // CJK one each
		{"привет", 2},               // other letters by 3
		{"🚀", 2},                    // symbols 2 each
		{`{"a":1}`, 5},              // {" a ": 1 }
		{`{"type":"object"}`, 5},    // {" type ":" object "}
	}
	for _, c := range cases {
		eq(t, fmt.Sprintf("TextTokens(%q)", c.s), TextTokens(c.s), c.want)
	}
}

func TestEstimateTokens(t *testing.T) {
	// A request's estimate is its text plus the documented overheads.
	body := []byte(`{"model":"m","system":"hi there","messages":[{"role":"user","content":"hello"},{"role":"assistant","content":[{"type":"thinking","thinking":"long long long thoughts","signature":"s"},{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}],"tools":[{"name":"f","description":"x","input_schema":{"type":"object"}}]}`)
	n, err := EstimateTokens(body)
	if err != nil {
		t.Fatal(err)
	}
	want := tokensPerRequest +
		tokensPerMessage + TextTokens("hi there") + // system
		tokensPerMessage + TextTokens("hello") +
		tokensPerMessage + tokensPerBlock + TextTokens("f") + TextTokens("{}") + // thinking not counted
		tokensPerMessage + tokensPerBlock + TextTokens("ok") +
		tokensPerTool + TextTokens("f") + TextTokens("x") + TextTokens(`{"type":"object"}`)
	eq(t, "estimate", n, want)
	out, err := CountTokens(body)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "count_tokens answer", string(out), fmt.Sprintf(`{"input_tokens":%d}`, want))

	// Images: Anthropic's w*h/750 from the PNG header; a 1×1 PNG is 1
	// token, an unknown size (URL) the 1600 ceiling.
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	eq(t, "1x1 png", imageTokens(&anSource{Type: "base64", MediaType: "image/png", Data: png}), 1)
	eq(t, "url image", imageTokens(&anSource{Type: "url", URL: "https://x/y.png"}), imageTokensMax)
	// A 1000×1000 PNG: 1000*1000/750 = 1333; a 4000×1000 one scales to
	// 1568×392: 820.
	eq(t, "1000x1000 png", imageTokens(&anSource{Type: "base64", Data: pngOf(t, 1000, 1000)}), 1333)
	eq(t, "4000x1000 png", imageTokens(&anSource{Type: "base64", Data: pngOf(t, 4000, 1000)}), 820)
	// PDF: 2000 per /Type /Page.
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 1 0 obj <</Type /Pages /Count 2>> 2 0 obj <</Type /Page>> 3 0 obj <</Type/Page>>"))
	eq(t, "two-page pdf", pdfTokens(pdf), 2*pdfTokensPerPage)

	_, err = EstimateTokens([]byte(`{"messages":"x"}`))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "messages" {
		t.Errorf("err = %v, want a FieldError naming messages", err)
	}
}

// pngOf encodes a blank w×h PNG in base64.
func pngOf(t *testing.T, w, h int) string {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}
