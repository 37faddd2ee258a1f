package mock

import (
	"unicode/utf8"

	"github.com/breakwater-dev/breakwater/internal/runtime/internal/jsonenc"
)

// appendJSONString appends s to dst as a quoted JSON string.
func appendJSONString(dst []byte, s string) []byte { return jsonenc.AppendString(dst, s) }

// splitRunes cuts s into at most n pieces of nearly equal rune counts, never
// splitting a UTF-8 sequence. An empty s yields no pieces; n < 1 counts as 1.
func splitRunes(s string, n int) []string {
	if s == "" {
		return nil
	}
	if n < 1 {
		n = 1
	}
	total := utf8.RuneCountInString(s)
	if n > total {
		n = total
	}
	pieces := make([]string, 0, n)
	base, extra := total/n, total%n
	pos := 0
	for i := 0; i < n; i++ {
		want := base
		if i < extra {
			want++
		}
		end := pos
		for r := 0; r < want; r++ {
			_, size := utf8.DecodeRuneInString(s[end:])
			end += size
		}
		pieces = append(pieces, s[pos:end])
		pos = end
	}
	return pieces
}

// splitBytes cuts s into pieces of about size bytes each, extending a piece
// to the end of a UTF-8 sequence when the cut falls inside one.
func splitBytes(s string, size int) []string {
	if s == "" {
		return nil
	}
	if size < 1 {
		size = 1
	}
	pieces := make([]string, 0, len(s)/size+1)
	for pos := 0; pos < len(s); {
		end := pos + size
		if end >= len(s) {
			end = len(s)
		} else {
			for end < len(s) && !utf8.RuneStart(s[end]) {
				end++
			}
		}
		pieces = append(pieces, s[pos:end])
		pos = end
	}
	return pieces
}

// estimateTokens is the mock's token count for n bytes of text: one token per
// four bytes, at least one for non-empty text.
func estimateTokens(n int) int {
	if n <= 0 {
		return 0
	}
	return (n + 3) / 4
}
