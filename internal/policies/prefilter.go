package policies

import (
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// minLiteral is the shortest required literal worth a look before a
// regular expression runs.
const minLiteral = 3

// literals are the literal strings every match of a regular expression
// contains (the literal pieces of its top-level concatenation), so that a
// body without one of them is known not to match without running the
// expression: an operator's /(?i)credit balance .* account-7/ rule
// skips every body without "credit balance ". The check is conservative.
// A case-insensitive piece is kept only when it is ASCII and looked for in
// the lower-cased body, which is exact unless the body holds U+017F or
// U+212A, the only non-ASCII characters that fold to ASCII letters ("ſ"
// to "s", the Kelvin sign to "k"): then those pieces are not looked for.
// Pieces that could match invalid UTF-8 (U+FFFD) are left out, and an
// expression without pieces always runs.
type literals struct {
	exact  []string // as written, case-sensitive
	folded []string // ASCII, lower-cased; case-insensitive
}

// requiredLiterals returns the literals of expr, which regexp.Compile
// accepted.
func requiredLiterals(expr string) literals {
	var l literals
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return l
	}
	re = uncapture(re)
	pieces := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		pieces = re.Sub
	}
	for _, p := range pieces {
		p = uncapture(p)
		if p.Op != syntax.OpLiteral || len(p.Rune) < minLiteral {
			continue
		}
		s := string(p.Rune)
		switch {
		case strings.ContainsRune(s, utf8.RuneError):
		case p.Flags&syntax.FoldCase == 0:
			l.exact = append(l.exact, s)
		case ascii(s):
			l.folded = append(l.folded, strings.ToLower(s))
		}
	}
	return l
}

// uncapture returns the expression inside capturing groups.
func uncapture(re *syntax.Regexp) *syntax.Regexp {
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	return re
}

// absent reports that the body of v lacks one of the literals, so the
// expression cannot match it.
func (l *literals) absent(v *errorView) bool {
	for _, s := range l.exact {
		if !strings.Contains(v.in.Body, s) {
			return true
		}
	}
	if len(l.folded) == 0 || !v.foldsLikeASCII() {
		return false
	}
	for _, s := range l.folded {
		if !strings.Contains(v.lowerBody(), s) {
			return true
		}
	}
	return false
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
