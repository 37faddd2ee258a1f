// Package redisstore is the engine.Store for several gateway instances that
// share state: a single Redis server, a Sentinel-managed master or a Redis
// Cluster, reached with go-redis's universal client (TLS and ACL
// credentials optional). It implements engine.SharedStore: every write
// also bumps its group's version counter and publishes a change notice, in
// the same script, so the other instances learn of it (Watch).
//
// Values use the envelope format (runtime/store/internal/envelope), so expiry
// is judged against the injected engine.Clock: the client sends its "now" to
// the Lua scripts that need it. Keys written with a TTL also carry a Redis PX
// expiry of ttl+GCGrace, only so that keys nobody reads again are collected.
// The key layout is described in keys.go.
//
// Every call is bounded by Options.Timeout. While Redis is unreachable,
// calls fail at once with an error wrapping engine.ErrStoreUnavailable
// (one call per second probes whether it is back); the outage and its end
// are logged once each (Status reports them).
//
// Durability is the server's: a write is acknowledged once Redis applied it;
// whether it survives a Redis crash depends on the server's AOF settings.
package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/internal/envelope"
)

// GCGrace is how long past its envelope expiry a key may linger before
// Redis's own PX expiry collects it.
const GCGrace = time.Minute

// pingTimeout bounds the connectivity check of Open.
const pingTimeout = 5 * time.Second

// scanCount and getBatch size the round trips of Scan.
const (
	scanCount = 512
	getBatch  = 256
)

// liveLua decodes the live payload of the value cur (a GET result) at the
// time stamp ARGV[1] into the locals live and payload.
var liveLua = `
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
`

// writeScript writes KEYS[1], bumps its group's version counter KEYS[2]
// and publishes the change notice, atomically.
// ARGV: 1 now stamp; 2 "put", "del" or "cas"; for "cas", 3 "0" the key
// must be absent / "1" its payload must equal 4; 5 "0" delete / "1" set
// to envelope 6 with PX 7 ("0": no PX); 8 channel; 9 and 10 the notice
// around the version number.
// Returns {1, version} when written ({1, 0} for a delete of an absent
// key, which changes nothing and announces nothing); for a failed "cas",
// {0} when the key is absent or {0, payload}.
var writeScript = redis.NewScript(`
if ARGV[2] == 'cas' then
  local cur = redis.call('GET', KEYS[1])
` + liveLua + `
  if ARGV[3] == '0' then
    if live then return {0, payload} end
  elseif not live then
    return {0}
  elseif payload ~= ARGV[4] then
    return {0, payload}
  end
end
if ARGV[5] == '0' then
  if redis.call('DEL', KEYS[1]) == 0 then return {1, 0} end
elseif ARGV[7] == '0' then
  redis.call('SET', KEYS[1], ARGV[6])
else
  redis.call('SET', KEYS[1], ARGV[6], 'PX', ARGV[7])
end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[8], ARGV[9] .. v .. ARGV[10])
return {1, v}
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

var _ engine.SharedStore = (*Store)(nil)

// Store is an engine.SharedStore on Redis. It is goroutine-safe; Close
// waits for in-flight operations.
type Store struct {
	client  redis.UniversalClient
	clock   engine.Clock
	logger  hclog.Logger
	keys    layout
	origin  string // this Store's id in change notices
	timeout time.Duration
	check   time.Duration
	health  *health
	vers    *versions

	groupsMu sync.Mutex
	groups   map[string]bool // groups this Store registered

	calls atomic.Uint64 // round trips sent to Redis

	mu     sync.RWMutex // read-held by operations, write-held by Close
	closed bool
}

// Open connects to Redis as o describes and pings it, failing within a few
// seconds if it does not answer. Errors and logs never contain a password.
// A nil logger discards logs.
func Open(o Options, clock engine.Clock, logger hclog.Logger) (*Store, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	client, err := o.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if err := probe(ctx, client); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("redisstore: ping %s: %w", o.describe(), scrubErr(err, o.URL, o.describe()))
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	s := &Store{
		client:  client,
		clock:   clock,
		logger:  logger,
		keys:    layout{prefix: o.KeyPrefix},
		origin:  hex.EncodeToString(id[:]),
		timeout: o.Timeout,
		check:   o.CheckInterval,
		health:  newHealth(logger, o.describe()),
		vers:    newVersions(),
		groups:  make(map[string]bool),
	}
	logger.Debug("connected", "redis", o.describe(), "mode", o.Mode, "key_prefix", o.KeyPrefix)
	return s, nil
}

// probe pings every node Open needs: the server, the Sentinel's master, or
// every Cluster master.
func probe(ctx context.Context, c redis.UniversalClient) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() })
	}
	return c.Ping(ctx).Err()
}

// RoundTrips returns how many calls (a command, a script or a pipeline)
// this Store has sent to Redis, for metrics and tests.
func (s *Store) RoundTrips() uint64 { return s.calls.Load() }

// Status reports whether Redis answers, since when, and why not.
func (s *Store) Status() Status { return s.health.status() }

// do runs one bounded call to Redis, failing fast while Redis is down, and
// classifies its error (see classify).
func (s *Store) do(ctx context.Context, fn func(ctx context.Context) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed
	}
	probe, err := s.health.admit()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	s.calls.Add(1)
	err = classify(fn(ctx))
	if errors.Is(err, redis.Nil) {
		s.health.done(probe, nil)
		return err
	}
	s.health.done(probe, err)
	return err
}

// Get returns the live value of key and whether it exists. An expired key
// reads as absent and is deleted.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	full := s.keys.data(s.keys.group(key), key)
	var raw []byte
	err := s.do(ctx, func(ctx context.Context) (err error) {
		raw, err = s.client.Get(ctx, full).Bytes()
		return err
	})
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
		s.drop(ctx, full, raw)
		return nil, false, nil
	}
	return payload, true, nil
}

// drop lazily deletes an expired value; failures are only traced.
func (s *Store) drop(ctx context.Context, fullKey string, raw []byte) {
	err := s.do(ctx, func(ctx context.Context) error {
		return dropScript.Run(ctx, s.client, []string{fullKey}, raw).Err()
	})
	if err != nil && s.logger.IsTrace() {
		s.logger.Trace("lazy delete of expired key skipped", "error", err)
	}
}

// Put sets key to value, expiring after ttl when ttl > 0.
func (s *Store) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if value == nil {
		value = []byte{}
	}
	_, _, _, err := s.write(ctx, "put", key, nil, value, ttl)
	if err != nil {
		return fmt.Errorf("redisstore: put %q: %w", key, err)
	}
	return nil
}

// Delete removes key; deleting an absent key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if _, _, _, err := s.write(ctx, "del", key, nil, nil, 0); err != nil {
		return fmt.Errorf("redisstore: delete %q: %w", key, err)
	}
	return nil
}

// CompareAndSet sets key to value only if its live value equals old; a nil
// old requires the key to be absent (or expired) and a nil value deletes it.
// It runs as one Lua script, so it is atomic across all clients.
func (s *Store) CompareAndSet(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	ok, _, _, err := s.write(ctx, "cas", key, old, value, ttl)
	if err != nil {
		return false, fmt.Errorf("redisstore: compare-and-set %q: %w", key, err)
	}
	return ok, nil
}

// Swap is CompareAndSet that returns the live value when it does not swap
// (engine.SharedStore). One round trip.
func (s *Store) Swap(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, []byte, bool, error) {
	ok, cur, exists, err := s.write(ctx, "cas", key, old, value, ttl)
	if err != nil {
		return false, nil, false, fmt.Errorf("redisstore: swap %q: %w", key, err)
	}
	return ok, cur, exists, nil
}

// write runs writeScript. For mode "cas", old nil means "must be absent";
// a nil value deletes. It returns whether the write happened and, for a
// failed "cas", the live value.
func (s *Store) write(ctx context.Context, mode, key string, old, value []byte, ttl time.Duration) (bool, []byte, bool, error) {
	g := s.keys.group(key)
	if err := s.register(ctx, g); err != nil {
		return false, nil, false, err
	}
	now := s.clock.Now()
	casMode, oldArg := "1", old
	if old == nil {
		casMode, oldArg = "0", []byte{}
	}
	set, env, px := "0", []byte{}, "0"
	if value != nil {
		set, env = "1", envelope.Encode(value, envelope.Expiry(now, ttl))
		if ttl > 0 {
			px = strconv.FormatInt((ttl + GCGrace).Milliseconds(), 10)
		}
	}
	head := s.origin + " " + g + " "
	tail := " " + strconv.FormatInt(time.Now().UnixNano(), 10) + " " + key
	var res []any
	err := s.do(ctx, func(ctx context.Context) (err error) {
		res, err = writeScript.Run(ctx, s.client, []string{s.keys.data(g, key), s.keys.version(g)},
			envelope.NowStamp(now), mode, casMode, oldArg, set, env, px, s.keys.channel(), head, tail).Slice()
		return err
	})
	if err != nil {
		return false, nil, false, err
	}
	if len(res) == 0 {
		return false, nil, false, errors.New("empty script reply")
	}
	if n, _ := res[0].(int64); n == 1 {
		if len(res) > 1 {
			if v, _ := res[1].(int64); v > 0 {
				s.vers.see(g, uint64(v))
			}
		}
		return true, nil, false, nil
	}
	if len(res) < 2 {
		return false, nil, false, nil
	}
	cur, _ := res[1].(string)
	return false, []byte(cur), true, nil
}

// register adds group g to the registry the version check reads, once per
// Store.
func (s *Store) register(ctx context.Context, g string) error {
	s.groupsMu.Lock()
	done := s.groups[g]
	s.groupsMu.Unlock()
	if done {
		return nil
	}
	err := s.do(ctx, func(ctx context.Context) error { return s.client.SAdd(ctx, s.keys.registry(), g).Err() })
	if err != nil {
		return err
	}
	s.groupsMu.Lock()
	s.groups[g] = true
	s.groupsMu.Unlock()
	return nil
}

// Scan returns every live key with prefix, sorted by key, and deletes the
// expired ones it meets. It uses SCAN MATCH (on every master of a Cluster)
// then pipelined GETs, so it is not a point-in-time snapshot: keys written
// during the scan may or may not appear.
func (s *Store) Scan(ctx context.Context, prefix string) ([]engine.KV, error) {
	pattern := s.keys.scanPattern(prefix)
	var mu sync.Mutex
	seen := make(map[string]string) // Redis key → store key
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, scanCount).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range keys {
				if key, ok := s.keys.parse(k); ok && strings.HasPrefix(key, prefix) {
					seen[k] = key
				}
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	err := s.do(ctx, func(ctx context.Context) error {
		if cc, ok := s.client.(*redis.ClusterClient); ok {
			return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
		}
		return scan(ctx, s.client)
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: scan %q: %w", prefix, err)
	}
	raws := make([]string, 0, len(seen))
	for k := range seen {
		raws = append(raws, k)
	}
	sort.Slice(raws, func(i, j int) bool { return seen[raws[i]] < seen[raws[j]] })

	now := s.clock.Now()
	out := make([]engine.KV, 0, len(raws))
	for start := 0; start < len(raws); start += getBatch {
		batch := raws[start:min(start+getBatch, len(raws))]
		var cmds []*redis.StringCmd
		err := s.do(ctx, func(ctx context.Context) error {
			pipe := s.client.Pipeline()
			cmds = make([]*redis.StringCmd, len(batch))
			for i, k := range batch {
				cmds[i] = pipe.Get(ctx, k)
			}
			_, err := pipe.Exec(ctx)
			if errors.Is(err, redis.Nil) {
				return nil
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("redisstore: scan %q: %w", prefix, err)
		}
		for i, cmd := range cmds {
			raw, err := cmd.Bytes()
			if errors.Is(err, redis.Nil) { // deleted since SCAN saw it
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("redisstore: scan %q: key %q: %w", prefix, batch[i], err)
			}
			stamp, payload, err := envelope.Decode(raw)
			if err != nil {
				return nil, fmt.Errorf("redisstore: scan %q: key %q: %w", prefix, seen[batch[i]], err)
			}
			if !envelope.Alive(stamp, now) {
				s.drop(ctx, batch[i], raw)
				continue
			}
			out = append(out, engine.KV{Key: seen[batch[i]], Value: payload})
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
	if rawURL == "" {
		return msg
	}
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
