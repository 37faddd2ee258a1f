package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// Key layout. Every key of one group (engine.KeyGroup: one provider's
// breaker, window gate, cooldowns and lockouts; all leases; all pins...)
// carries the group as a Redis Cluster hash tag, so the group's keys and
// its version counter share a hash slot and one script may touch them
// together:
//
//	<prefix>{<group>}:<key>   a value (envelope-encoded)
//	<prefix>{<group>}#v       the group's version counter: +1 per change
//	<prefix>#groups           the set of groups ever written
//	<prefix>#changes          the pub/sub channel of change notices
//
// A notice is "<origin> <group> <version> <sent unix ns> <key>": origin is
// the writing Store (an instance ignores its own), the version lets a
// receiver tell whether it missed one.

// layout builds the Redis names under one prefix.
type layout struct{ prefix string }

// group is the hash-tag-safe group of key: engine.KeyGroup, or a digest of
// it when it holds a brace, a control byte or is long.
func (l layout) group(key string) string {
	return safeGroup(engine.KeyGroup(key))
}

func safeGroup(g string) string {
	ok := len(g) > 0 && len(g) <= 128
	for i := 0; ok && i < len(g); i++ {
		c := g[i]
		ok = c > ' ' && c < 0x7f && c != '{' && c != '}'
	}
	if ok {
		return g
	}
	sum := sha256.Sum256([]byte(g))
	return "h:" + hex.EncodeToString(sum[:8])
}

// data is the Redis key of store key key in group g.
func (l layout) data(g, key string) string { return l.prefix + "{" + g + "}:" + key }

// version is the Redis key of group g's version counter.
func (l layout) version(g string) string { return l.prefix + "{" + g + "}#v" }

// registry is the Redis set of every group written.
func (l layout) registry() string { return l.prefix + "#groups" }

// channel is the pub/sub channel of change notices.
func (l layout) channel() string { return l.prefix + "#changes" }

// parse returns the store key of Redis key raw, if raw is a value key.
func (l layout) parse(raw string) (string, bool) {
	rest, ok := strings.CutPrefix(raw, l.prefix+"{")
	if !ok {
		return "", false
	}
	i := strings.Index(rest, "}:")
	if i < 0 {
		return "", false
	}
	return rest[i+2:], true
}

// scanPattern is the SCAN MATCH pattern of the keys starting with prefix:
// one group's keys when the prefix decides the group, every group's
// otherwise.
func (l layout) scanPattern(prefix string) string {
	g := "*"
	if pg, ok := engine.PrefixGroup(prefix); ok {
		g = escapeGlob(safeGroup(pg))
	}
	return escapeGlob(l.prefix) + "{" + g + "}:" + escapeGlob(prefix) + "*"
}

// escapeGlob escapes the characters Redis MATCH patterns treat specially.
func escapeGlob(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
