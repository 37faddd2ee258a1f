package engine

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseToolLimitText: whatever an upstream's error text says,
// parseToolLimitText never panics, and a limit it finds is positive and
// written in the text (its digits, perhaps after leading zeros); no limit
// means 0.
func FuzzParseToolLimitText(f *testing.F) {
	for _, s := range []string{
		"Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 129 instead.",
		"You may not include more than 128 tools",
		"At most 512 function declarations can be specified",
		"a maximum of 0128 tools", "maximum of 99999999999999999999999 tools", "more than 0 tools",
		"tools: at most 12", "TOOLS array: maximum length 7", "ﬁ more than 3 tools",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		n, ok := parseToolLimitText(text)
		if !ok {
			if n != 0 {
				t.Fatalf("parseToolLimitText(%q) = %d, false", text, n)
			}
			return
		}
		if n <= 0 || !strings.Contains(text, strconv.Itoa(n)) {
			t.Fatalf("parseToolLimitText(%q) = %d, a limit not written in the text", text, n)
		}
	})
}
