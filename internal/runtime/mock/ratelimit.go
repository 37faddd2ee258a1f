package mock

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
)

// RateLimit gives every API key that calls a rule a token bucket of its
// own, as a provider's per-key request limit: Burst tokens, refilled at
// RequestsPerSecond. A call that finds a token takes it and gets the
// rule's next step with the x-ratelimit-* headers added; a call that finds
// the bucket empty gets 429 (OpenAI's rate-limit body) with Retry-After
// (whole seconds, rounded up), retry-after-ms and the same headers, and
// uses no step of the rule.
type RateLimit struct {
	// RequestsPerSecond is the refill rate (> 0).
	RequestsPerSecond float64 `yaml:"requests_per_second"`
	// Burst is the bucket size (≥ 1; default 1).
	Burst int `yaml:"burst"`
}

func (rl *RateLimit) validate() error {
	if rl.RequestsPerSecond <= 0 || math.IsInf(rl.RequestsPerSecond, 0) || math.IsNaN(rl.RequestsPerSecond) {
		return fmt.Errorf("rate_limit.requests_per_second: %v must be > 0", rl.RequestsPerSecond)
	}
	if rl.Burst < 0 {
		return fmt.Errorf("rate_limit.burst: %d must not be negative", rl.Burst)
	}
	return nil
}

func (rl *RateLimit) burst() float64 { return float64(max(rl.Burst, 1)) }

// rateLimitBody is the 429 body of an empty bucket.
const rateLimitBody = `{"error":{"message":"Rate limit reached for requests per second. Please try again later.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`

// buckets are the token buckets of one rule, per API key. Goroutine-safe.
type buckets struct {
	limit *RateLimit
	now   func() time.Time
	mu    sync.Mutex
	byKey map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newBuckets(rl *RateLimit, now func() time.Time) *buckets {
	return &buckets{limit: rl, now: now, byKey: map[string]*bucket{}}
}

// take takes a token of key's bucket. It reports whether there was one,
// and returns the rate-limit headers to answer with: the x-ratelimit-*
// headers, and for an empty bucket Retry-After and retry-after-ms.
func (b *buckets) take(key string) (bool, map[string]string) {
	rate, size := b.limit.RequestsPerSecond, b.limit.burst()
	b.mu.Lock()
	now := b.now()
	bk, ok := b.byKey[key]
	if !ok {
		bk = &bucket{tokens: size, at: now}
		b.byKey[key] = bk
	}
	bk.tokens = min(size, bk.tokens+now.Sub(bk.at).Seconds()*rate)
	bk.at = now
	granted := bk.tokens >= 1
	if granted {
		bk.tokens--
	}
	tokens := bk.tokens
	b.mu.Unlock()

	// x-ratelimit-reset-requests: time until the bucket is full again.
	headers := map[string]string{
		"x-ratelimit-limit-requests":     strconv.Itoa(int(size)),
		"x-ratelimit-remaining-requests": strconv.Itoa(int(math.Floor(tokens))),
		"x-ratelimit-reset-requests":     secondsDuration((size - tokens) / rate).String(),
	}
	if !granted {
		wait := secondsDuration((1 - tokens) / rate)
		headers["Retry-After"] = strconv.Itoa(int(math.Ceil(wait.Seconds())))
		headers["retry-after-ms"] = strconv.FormatInt(max(wait.Milliseconds(), 1), 10)
	}
	return granted, headers
}

// limited answers a call of a rate-limited rule: a 429 step when key's
// bucket is empty, else a copy of the rule's next step (from next) with
// the rate-limit headers added (the step's own headers win).
func (b *buckets) limited(key string, next func() *Step) *Step {
	granted, headers := b.take(key)
	if !granted {
		return &Step{Status: 429, Headers: headers, Body: rateLimitBody}
	}
	st := *next()
	for k, v := range st.Headers {
		headers[k] = v
	}
	st.Headers = headers
	return &st
}

// secondsDuration converts seconds to a duration rounded up to the
// millisecond (as providers print x-ratelimit-reset-requests: "1s", "120ms").
func secondsDuration(s float64) time.Duration {
	return time.Duration(math.Ceil(s*1000)) * time.Millisecond
}
