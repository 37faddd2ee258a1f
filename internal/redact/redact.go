// Package redact removes credentials from text before it leaves the
// gateway or enters a log: upstream error bodies and headers, error
// messages, plugin log lines, policy traces. It is the one redaction of
// the gateway (docs/architecture.md, "No secret ever leaves").
//
// Two things are removed, each replaced by Mask:
//
//   - Configured credentials (New): every occurrence of each value, exact
//     bytes, whatever its shape. Values shorter than MinSecretLen are
//     ignored (too likely to occur by chance; no real key is that short).
//   - Anything key-shaped, configured or not. A token is a maximal run of
//     ASCII letters, digits, '-' and '_'; it is masked when it is
//     1. an OpenAI/Anthropic-style key: "sk-" and at least 17 more
//     characters (sk-proj-…, sk-ant-api03-…, sk-or-v1-…);
//     2. a Google API key: "AIza" and at least 16 more characters;
//     3. the credential after "Bearer " (any case, then spaces or tabs):
//     the run of characters up to the next space, quote, comma,
//     semicolon or angle bracket, when it is 8 characters or more;
//     4. a long random-looking token: 32 characters or more, with upper
//     case, lower case and digits, changing between these classes at 40 %
//     or more of its adjacent pairs (random base62 does so at 62 %, a
//     CamelCase identifier at about 30 %), with a Shannon entropy of at
//     least 3 bits per character. About 1 % of random 32-character keys
//     change class less often and are missed (0.04 % at 64 characters):
//     configure every credential so its exact value is removed;
//     5. a JSON Web Token: a token starting "eyJ" (base64 of '{"'), 10
//     characters or more, followed by '.' and more segments: the whole
//     dotted run is masked.
//
// What is kept, so messages stay useful: ordinary words, identifiers and
// model names, single-case tokens of any length (UUIDs, hexadecimal
// digests and request ids are ids far more often than keys; configure a
// single-case key as a credential to have it removed), and tokens that
// start with a known id prefix (req_, msg_, chatcmpl-, resp_, toolu_,
// call_, file-, batch_, run_, thread_, asst_, cmpl-, gen-, evt_).
// '+', '/', '.' and '=' end a token, so paths and URLs are judged segment
// by segment.
//
// Redaction runs on error texts and on the upstream headers relayed to the
// client. It makes one pass over the text for the shapes and, for the
// configured values, one strings.Index scan per value — or, with 24 or
// more values (a gateway with many connections), one pass that looks
// each position up by its first bytes — and allocates nothing when
// nothing matches (the input is returned as is).
package redact

import (
	"math"
	"net/http"
	"slices"
	"strings"
	"unsafe"
)

// Mask replaces every redacted credential.
const Mask = "[redacted]"

// MinSecretLen is the shortest configured value New keeps.
const MinSecretLen = 8

// Redactor removes configured credentials and key-shaped tokens. It is
// immutable and goroutine-safe. A nil *Redactor removes key-shaped tokens
// only.
type Redactor struct {
	secrets []string // longest first, so a value inside another is covered
	// byHead indexes secrets by their first MinSecretLen bytes when there
	// are at least indexedMin of them (a gateway with many connections):
	// find then makes one pass over the text instead of one scan per
	// value. heads marks the first two bytes of every value, so most
	// positions cost one bit test.
	byHead map[uint64][]int32
	heads  *[1 << 16 / 64]uint64
}

// indexedMin is how many configured values make find look them up by
// their first bytes in one pass: below it, one strings.Index per value
// (vectorised) is faster.
const indexedMin = 24

// New returns a Redactor for the given credential values; empty values
// and values shorter than MinSecretLen are ignored, duplicates kept once.
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		if len(s) >= MinSecretLen && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
	if len(r.secrets) >= indexedMin {
		r.byHead = make(map[uint64][]int32, len(r.secrets))
		r.heads = new([1 << 16 / 64]uint64)
		for i, sec := range r.secrets {
			r.byHead[head8(sec, 0)] = append(r.byHead[head8(sec, 0)], int32(i))
			h2 := head2(sec, 0)
			r.heads[h2>>6] |= 1 << (h2 & 63)
		}
	}
	return r
}

// head2 and head8 read the 2 and 8 bytes of s at i (little-endian).
func head2(s string, i int) uint16 { return uint16(s[i]) | uint16(s[i+1])<<8 }

func head8(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// findSecrets appends to spans every occurrence in s of a configured
// value: by the index of their first bytes when r has one, else one
// strings.Index scan per value. Both give the same ranges once merged.
func (r *Redactor) findSecrets(s string, spans []span) []span {
	if r.byHead == nil {
		for _, sec := range r.secrets {
			for off := 0; off <= len(s)-len(sec); {
				i := strings.Index(s[off:], sec)
				if i < 0 {
					break
				}
				spans = append(spans, span{off + i, off + i + len(sec)})
				off += i + len(sec)
			}
		}
		return spans
	}
	for i := 0; i+MinSecretLen <= len(s); i++ {
		if h2 := head2(s, i); r.heads[h2>>6]&(1<<(h2&63)) == 0 {
			continue
		}
		for _, j := range r.byHead[head8(s, i)] {
			if sec := r.secrets[j]; strings.HasPrefix(s[i:], sec) {
				spans = append(spans, span{i, i + len(sec)})
			}
		}
	}
	return spans
}

// String returns s without credentials: s itself when nothing matches.
func String(s string) string { return (*Redactor)(nil).String(s) }

// Bytes returns b without credentials: b itself when nothing matches.
func Bytes(b []byte) []byte { return (*Redactor)(nil).Bytes(b) }

// Len is how many configured credentials r removes.
func (r *Redactor) Len() int {
	if r == nil {
		return 0
	}
	return len(r.secrets)
}

// span is a byte range to mask.
type span struct{ lo, hi int }

// String returns s with every configured credential and key-shaped token
// replaced by Mask; s itself (no allocation) when nothing matches.
func (r *Redactor) String(s string) string {
	var buf [8]span
	spans := r.find(s, buf[:0])
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.lo])
		b.WriteString(Mask)
		last = sp.hi
	}
	b.WriteString(s[last:])
	return b.String()
}

// Bytes is String for a byte slice: it returns b itself when nothing
// matches, else a new slice (b is never modified).
func (r *Redactor) Bytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	var buf [8]span
	// The string aliases b only for the scan; nothing keeps it.
	spans := r.find(unsafe.String(unsafe.SliceData(b), len(b)), buf[:0])
	if len(spans) == 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	last := 0
	for _, sp := range spans {
		out = append(out, b[last:sp.lo]...)
		out = append(out, Mask...)
		last = sp.hi
	}
	return append(out, b[last:]...)
}

// credentialHeaders are masked whole by Header, whatever their value.
var credentialHeaders = map[string]bool{
	"Authorization":            true,
	"Proxy-Authorization":      true,
	"X-Api-Key":                true,
	"Api-Key":                  true,
	"X-Goog-Api-Key":           true,
	"Cookie":                   true,
	"Set-Cookie":               true,
	"X-Breakwater-Lease-Owner": true,
}

// IsCredentialHeader reports whether a header (any case) carries a
// credential as its whole value: Authorization, Proxy-Authorization,
// X-Api-Key, Api-Key, X-Goog-Api-Key, Cookie, Set-Cookie and
// X-Breakwater-Lease-Owner.
func IsCredentialHeader(name string) bool {
	return credentialHeaders[http.CanonicalHeaderKey(name)]
}

// Header returns h with credential headers (IsCredentialHeader) masked
// whole and every other value redacted as String does; h itself when
// nothing changes, else a copy (h is never modified).
func (r *Redactor) Header(h http.Header) http.Header {
	var out http.Header
	for k, vs := range h {
		cred := IsCredentialHeader(k)
		for i, v := range vs {
			nv := Mask
			if !cred {
				nv = r.String(v)
			}
			if nv == v {
				continue
			}
			if out == nil {
				out = h.Clone()
			}
			out[k][i] = nv
		}
	}
	if out == nil {
		return h
	}
	return out
}

// find appends to spans the sorted, merged ranges of s to mask.
func (r *Redactor) find(s string, spans []span) []span {
	if r != nil {
		spans = r.findSecrets(s, spans)
	}
	spans = shapes(s, spans)
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b span) int { return a.lo - b.lo })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		last := &merged[len(merged)-1]
		if sp.lo <= last.hi {
			last.hi = max(last.hi, sp.hi)
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

// tokenByte marks the bytes of a token: ASCII letters, digits, '-', '_'.
var tokenByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	return t
}()

// bearerEnd marks the bytes that end a bearer credential.
var bearerEnd = func() (t [256]bool) {
	for _, c := range []byte(" \t\r\n\"'`,;<>()[]{}\\") {
		t[c] = true
	}
	return t
}()

// shapes appends the key-shaped tokens of s (see the package
// documentation).
func shapes(s string, spans []span) []span {
	for i := 0; i < len(s); {
		if !tokenByte[s[i]] {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && tokenByte[s[j]] {
			j++
		}
		tok := s[i:j]
		if len(tok) == 6 && strings.EqualFold(tok, "bearer") {
			k := j
			for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
				k++
			}
			m := k
			for m < len(s) && !bearerEnd[s[m]] {
				m++
			}
			if k > j && m-k >= 8 {
				spans = append(spans, span{k, m})
				i = m
				continue
			}
		}
		if len(tok) >= 10 && strings.HasPrefix(tok, "eyJ") && j+1 < len(s) && s[j] == '.' && tokenByte[s[j+1]] {
			for j < len(s) && (tokenByte[s[j]] || s[j] == '.' && j+1 < len(s) && tokenByte[s[j+1]]) {
				j++
			}
			spans = append(spans, span{i, j})
			i = j
			continue
		}
		if keyShaped(tok) {
			spans = append(spans, span{i, j})
		}
		i = j
	}
	return spans
}

// idPrefixes start tokens that are ids, not credentials.
var idPrefixes = [...]string{"req_", "msg_", "chatcmpl-", "resp_", "toolu_", "call_", "file-", "batch_", "run_", "thread_", "asst_", "cmpl-", "gen-", "evt_"}

// keyShaped reports whether a token (tokenByte only) looks like a key:
// rules 1, 2 and 4 of the package documentation.
func keyShaped(tok string) bool {
	switch {
	case len(tok) < 20:
		return false
	case strings.HasPrefix(tok, "sk-"):
		return true
	case strings.HasPrefix(tok, "AIza"):
		return true
	case len(tok) < 32:
		return false
	}
	for _, p := range idPrefixes {
		if strings.HasPrefix(tok, p) {
			return false
		}
	}
	var seen [4]bool
	changes, prev := 0, -1
	for i := 0; i < len(tok); i++ {
		c := charClass(tok[i])
		seen[c] = true
		if prev >= 0 && c != prev {
			changes++
		}
		prev = c
	}
	if !seen[classDigit] || !seen[classLower] || !seen[classUpper] {
		return false
	}
	return changes*5 >= (len(tok)-1)*2 && entropy(tok) >= 3
}

// Character classes of keyShaped.
const (
	classDigit = iota
	classLower
	classUpper
	classOther // '-' and '_'
)

func charClass(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return classDigit
	case c >= 'a' && c <= 'z':
		return classLower
	case c >= 'A' && c <= 'Z':
		return classUpper
	}
	return classOther
}

// entropy is the Shannon entropy of tok's bytes, in bits per byte.
func entropy(tok string) float64 {
	var counts [256]uint16
	for i := 0; i < len(tok); i++ {
		counts[tok[i]]++
	}
	n := float64(len(tok))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
