package translate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestDumpCountTokensText writes, with BW_DUMP_TOKEN_TEXT=DIR, the text
// pieces of every Anthropic request fixture, to measure TextTokens against
// a real tokenizer (see tokenRefs). It does nothing otherwise.
func TestDumpCountTokensText(t *testing.T) {
	dir := os.Getenv("BW_DUMP_TOKEN_TEXT")
	if dir == "" {
		t.Skip("set BW_DUMP_TOKEN_TEXT=DIR to dump")
	}
	for _, f := range fixtures(t, "anthropic/requests") {
		pieces, err := countTokensText(readFile(t, f))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(pieces)
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
