// Package redisstore is the engine.Store for several gateway instances that
// share state: a single Redis server (not Cluster) reached with go-redis.
//
// Values use the envelope format (runtime/store/internal/envelope), so expiry
// is judged against the injected engine.Clock: the client sends its "now" to
// the Lua scripts that need it. Keys written with a TTL also carry a Redis PX
// expiry of ttl+GCGrace, only so that keys nobody reads again are collected.
//
// Durability is the server's: a write is acknowledged once Redis applied it;
// whether it survives a Redis crash depends on the server's AOF settings.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/internal/envelope"
)

// DefaultKeyPrefix namespaces every key Breakwater writes to Redis.
const DefaultKeyPrefix = "breakwater:"

// GCGrace is how long past its envelope expiry a key may linger before
// Redis's own PX expiry collects it.
const GCGrace = time.Minute

// pingTimeout bounds the connectivity check of Open.
const pingTimeout = 5 * time.Second

// scanCount and mgetBatch size the round trips of Scan.
const (
	scanCount = 512
	mgetBatch = 256
)

// casScript atomically compares the live payload of KEYS[1] and sets or
// deletes it.
// ARGV: 1 now stamp, 2 "0" key must be absent / "1" payload must equal
// ARGV[3], 4 "0" delete / "1" set to envelope ARGV[5] with PX ARGV[6]
// ("0": no PX). Returns 1 when swapped, 0 otherwise.
var casScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
local live = false
local payload = nil
if cur then
  if string.len(cur) < ` + fmt.Sprint(envelope.HeaderLen) + ` or string.sub(cur, 1, 1) ~= '` + string(rune(envelope.Version)) + `' then
    return redis.error_reply('breakwater: malformed stored value')
  end
  local exp = string.sub(cur, 2, ` + fmt.Sprint(envelope.HeaderLen) + `)
  if exp == '` + envelope.NoExpiry + `' or ARGV[1] < exp then
    live = true
    payload = string.sub(cur, ` + fmt.Sprint(envelope.HeaderLen+1) + `)
  end
end
if ARGV[2] == '0' then
  if live then return 0 end
elseif (not live) or payload ~= ARGV[3] then
  return 0
end
if ARGV[4] == '0' then
  redis.call('DEL', KEYS[1])
elseif ARGV[6] == '0' then
  redis.call('SET', KEYS[1], ARGV[5])
else
  redis.call('SET', KEYS[1], ARGV[5], 'PX', ARGV[6])
end
return 1
`)

// dropScript deletes KEYS[1] only if it still holds exactly ARGV[1], so a
// lazy deletion never removes a value written after the expired one was read.
var dropScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// errClosed is returned by every operation after Close.
var errClosed = errors.New("redisstore: store is closed")

var _ engine.Store = (*Store)(nil)

// Option configures Open.
type Option func(*Store)

// WithKeyPrefix replaces DefaultKeyPrefix; "" stores keys as given.
func WithKeyPrefix(prefix string) Option {
	return func(s *Store) { s.prefix = prefix }
}

// Store is an engine.Store on a Redis server. It is goroutine-safe; Close
// waits for in-flight operations.
type Store struct {
	client *redis.Client
	clock  engine.Clock
	logger hclog.Logger
	prefix string

	mu     sync.RWMutex // read-held by operations, write-held by Close
	closed bool
}

// Open connects to the Redis server at rawURL (redis://, rediss:// or
// unix://) and pings it, failing within a few seconds if it does not answer.
// Errors never contain the URL's password. A nil logger discards logs.
func Open(rawURL string, clock engine.Clock, logger hclog.Logger, opts ...Option) (*Store, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	safe := redactURL(rawURL)
	ropts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redisstore: invalid redis URL %s: %s", safe, scrub(err.Error(), rawURL, safe))
	}
	if err := probe(*ropts); err != nil {
		return nil, fmt.Errorf("redisstore: ping %s: %w", safe, scrubErr(err, rawURL, safe))
	}
	s := &Store{client: redis.NewClient(ropts), clock: clock, logger: logger, prefix: DefaultKeyPrefix}
	for _, o := range opts {
		o(s)
	}
	logger.Debug("connected", "url", safe, "key_prefix", s.prefix)
	return s, nil
}

// probe pings the server once over a throwaway connection without the
// client's dial and command retries, so an unreachable server fails Open at
// once instead of after the retry backoff the long-lived client keeps.
func probe(opts redis.Options) error {
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.PoolSize = 1
	c := redis.NewClient(&opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	return c.Ping(ctx).Err()
}

// Get returns the live value of key and whether it exists. An expired key
// reads as absent and is deleted.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, false, errClosed
	}
	raw, err := s.client.Get(ctx, s.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("redisstore: get %q: %w", key, err)
	}
	stamp, payload, err := envelope.Decode(raw)
	if err != nil {
		return nil, false, fmt.Errorf("redisstore: get %q: %w", key, err)
	}
	if !envelope.Alive(stamp, s.clock.Now()) {
		s.drop(ctx, s.prefix+key, raw)
		return nil, false, nil
	}
	return payload, true, nil
}

// drop lazily deletes an expired value; failures are only traced.
func (s *Store) drop(ctx context.Context, fullKey string, raw []byte) {
	if err := dropScript.Run(ctx, s.client, []string{fullKey}, raw).Err(); err != nil && s.logger.IsTrace() {
		s.logger.Trace("lazy delete of expired key skipped", "error", err)
	}
}

// Put sets key to value, expiring after ttl when ttl > 0.
func (s *Store) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed
	}
	env := envelope.Encode(value, envelope.Expiry(s.clock.Now(), ttl))
	var px time.Duration
	if ttl > 0 {
		px = ttl + GCGrace
	}
	if err := s.client.Set(ctx, s.prefix+key, env, px).Err(); err != nil {
		return fmt.Errorf("redisstore: put %q: %w", key, err)
	}
	return nil
}

// CompareAndSet sets key to value only if its live value equals old; a nil
// old requires the key to be absent (or expired) and a nil value deletes it.
// It runs as one Lua script, so it is atomic across all clients.
func (s *Store) CompareAndSet(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return false, errClosed
	}
	now := s.clock.Now()
	mode, oldArg := "1", old
	if old == nil {
		mode, oldArg = "0", []byte{}
	}
	set, env, px := "0", []byte{}, "0"
	if value != nil {
		set, env = "1", envelope.Encode(value, envelope.Expiry(now, ttl))
		if ttl > 0 {
			px = fmt.Sprint((ttl + GCGrace).Milliseconds())
		}
	}
	n, err := casScript.Run(ctx, s.client, []string{s.prefix + key},
		envelope.NowStamp(now), mode, oldArg, set, env, px).Int()
	if err != nil {
		return false, fmt.Errorf("redisstore: compare-and-set %q: %w", key, err)
	}
	return n == 1, nil
}

// Delete removes key; deleting an absent key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed
	}
	if err := s.client.Del(ctx, s.prefix+key).Err(); err != nil {
		return fmt.Errorf("redisstore: delete %q: %w", key, err)
	}
	return nil
}

// Scan returns every live key with prefix, sorted by key, and deletes the
// expired ones it meets. It uses SCAN MATCH (glob characters of the prefix
// escaped) then MGET, so it is not a point-in-time snapshot: keys written
// during the scan may or may not appear.
func (s *Store) Scan(ctx context.Context, prefix string) ([]engine.KV, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed
	}
	full := s.prefix + prefix
	pattern := escapeGlob(full) + "*"
	seen := make(map[string]struct{})
	var cursor uint64
	for {
		keys, next, err := s.client.Scan(ctx, cursor, pattern, scanCount).Result()
		if err != nil {
			return nil, fmt.Errorf("redisstore: scan %q: %w", prefix, err)
		}
		for _, k := range keys {
			if strings.HasPrefix(k, full) { // belt and braces over MATCH
				seen[k] = struct{}{}
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	now := s.clock.Now()
	out := make([]engine.KV, 0, len(keys))
	for start := 0; start < len(keys); start += mgetBatch {
		batch := keys[start:min(start+mgetBatch, len(keys))]
		vals, err := s.client.MGet(ctx, batch...).Result()
		if err != nil {
			return nil, fmt.Errorf("redisstore: scan %q: %w", prefix, err)
		}
		for i, v := range vals {
			str, ok := v.(string)
			if !ok { // deleted since SCAN saw it
				continue
			}
			raw := []byte(str)
			stamp, payload, err := envelope.Decode(raw)
			if err != nil {
				return nil, fmt.Errorf("redisstore: scan %q: key %q: %w", prefix, batch[i], err)
			}
			if !envelope.Alive(stamp, now) {
				s.drop(ctx, batch[i], raw)
				continue
			}
			out = append(out, engine.KV{Key: strings.TrimPrefix(batch[i], s.prefix), Value: payload})
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// Close closes the connection pool. It is safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("redisstore: close: %w", err)
	}
	return nil
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

// redactURL returns rawURL with any password replaced, even when rawURL does
// not parse.
func redactURL(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return "[unparseable URL]"
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return scheme + "://xxxxx@" + rest[at+1:]
	}
	return rawURL
}

// scrub replaces rawURL and its password inside msg with their redacted form.
func scrub(msg, rawURL, safe string) string {
	if rawURL != safe {
		msg = strings.ReplaceAll(msg, rawURL, safe)
	}
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// scrubErr keeps err for errors.Is when it leaks nothing, and flattens it to
// a scrubbed message otherwise.
func scrubErr(err error, rawURL, safe string) error {
	msg := err.Error()
	if clean := scrub(msg, rawURL, safe); clean != msg {
		return errors.New(clean)
	}
	return err
}
