package policies

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/redact"
)

// Decision log defaults (DecisionLogOptions).
const (
	DefaultDecisionBuffer        = 1000
	DefaultDecisionFileMaxBytes  = 100 << 20
	DefaultDecisionBatchSize     = 100
	DefaultDecisionFlushInterval = 5 * time.Second
	DefaultDecisionQueueSize     = 10000
)

// Masked is the value a masked header takes in the decision log (the
// gateway's one redaction mark, redact.Mask).
const Masked = redact.Mask

// DecisionLogOptions configure the decision log (Options.DecisionLog).
// Every failure-path decision goes to a ring buffer of Buffer decisions
// (Decisions), and, when set, to a JSON-lines File and to an OPA decision
// log service at URL. Zero fields take their defaults.
type DecisionLogOptions struct {
	// Buffer is how many recent decisions the ring buffer keeps (default
	// DefaultDecisionBuffer).
	Buffer int
	// File receives one JSON object per line. When it would grow past
	// FileMaxBytes (default DefaultDecisionFileMaxBytes) it is rotated:
	// renamed to File+".1", replacing the previous one, and started anew.
	File         string
	FileMaxBytes int64
	// URL receives the decisions as OPA decision log events: POSTed in
	// batches of at most BatchSize (default DefaultDecisionBatchSize), at
	// least every FlushInterval (default DefaultDecisionFlushInterval), as
	// a gzip-compressed JSON array, with Headers (e.g. Authorization).
	URL           string
	Headers       map[string]string
	BatchSize     int
	FlushInterval time.Duration
	// QueueSize bounds the decisions waiting for the file or the service
	// (default DefaultDecisionQueueSize each); past it they are dropped and
	// counted.
	QueueSize int
	// Labels are the OPA events' labels; "id" (this instance) defaults to
	// a random id and "app" to "breakwater".
	Labels map[string]string
	// Client posts to URL; nil means a client with a 30 s timeout.
	Client *http.Client
}

// Decision is one failure-path decision as the decision log records it.
// It never holds a body or a secret: the body (and the text derived from
// it) is erased and credential-like headers are masked, and Erased and
// Masked list what was (as JSON pointers into this record, as OPA does).
type Decision struct {
	ID        string    `json:"decision_id"`
	Time      time.Time `json:"timestamp"`
	RequestID string    `json:"request_id,omitempty"`

	Provider   string `json:"provider"`
	Connection string `json:"connection,omitempty"`
	Model      string `json:"model,omitempty"`
	Profile    string `json:"profile,omitempty"`
	// Status is the status the upstream sent (0 for a transport error).
	Status int `json:"status"`
	DecisionResult

	// Revision is the serving policy revision; BundleRevision the
	// operator bundle's (policies from a bundle server only).
	Revision       string `json:"revision"`
	BundleRevision string `json:"bundle_revision,omitempty"`
	// DurationNS is how long the pipeline took to decide.
	DurationNS int64 `json:"duration_ns"`

	Headers   map[string]string `json:"headers,omitempty"`
	ErrorCode string            `json:"error_code,omitempty"`
	ErrorType string            `json:"error_type,omitempty"`
	Erased    []string          `json:"erased,omitempty"`
	Masked    []string          `json:"masked,omitempty"`
}

// DecisionResult is what the pipeline decided for one attempt: the status
// after restatement (the status as sent when none), the restating and the
// classifying rules, the reason, scope and cooldown, and the retry-after
// told to the client.
type DecisionResult struct {
	RestatedStatus int  `json:"restated_status"`
	Transport      bool `json:"transport,omitempty"`

	RestateRuleID string `json:"restate_rule_id,omitempty"`
	RestateSource string `json:"restate_source,omitempty"`
	// RuleID and RuleSource name the classifying rule.
	RuleID             string `json:"rule_id"`
	RuleSource         string `json:"rule_source"`
	Reason             string `json:"reason"`
	Scope              string `json:"scope,omitempty"`
	CooldownMS         int64  `json:"cooldown_ms,omitempty"`
	ClientRetryAfterMS int64  `json:"client_retry_after_ms,omitempty"`
}

// DecisionLogStatus describes the decision log for GET /api/policies.
type DecisionLogStatus struct {
	// Recorded counts the decisions recorded since start; Buffered how many
	// the ring buffer holds, of Capacity.
	Recorded uint64      `json:"recorded"`
	Buffered int         `json:"buffered"`
	Capacity int         `json:"capacity"`
	File     *SinkStatus `json:"file,omitempty"`
	Service  *SinkStatus `json:"service,omitempty"`
}

// SinkStatus describes the file or service a decision log ships to.
type SinkStatus struct {
	// Target is the file path or the service URL (without its query).
	Target string `json:"target"`
	// Written counts decisions written to the file or accepted by the
	// service; Dropped those lost (queue full, write or upload failed for
	// good); Queued those waiting.
	Written uint64 `json:"written"`
	Dropped uint64 `json:"dropped"`
	Queued  int    `json:"queued"`
	// Rotations counts file rotations; Uploads successful service
	// batches; Failures failed writes or uploads.
	Rotations uint64    `json:"rotations,omitempty"`
	Uploads   uint64    `json:"uploads,omitempty"`
	Failures  uint64    `json:"failures"`
	LastError string    `json:"last_error,omitempty"`
	LastWrite time.Time `json:"last_write,omitzero"`
}

// decisionLog is the pipeline's decision log: the ring buffer and the
// sinks. record is called on the failure path and never blocks: the ring
// buffer is a slice under a short lock, the sinks are fed through bounded
// queues and run in their own goroutines (run).
type decisionLog struct {
	instance string
	seq      atomic.Uint64

	mu   sync.Mutex
	ring []Decision
	next int // where the next decision goes
	size int // decisions in ring, ≤ len(ring)

	file    *fileSink
	service *serviceSink
}

func newDecisionLog(o *DecisionLogOptions) *decisionLog {
	n := o.Buffer
	if n <= 0 {
		n = DefaultDecisionBuffer
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	l := &decisionLog{instance: hex.EncodeToString(id[:]), ring: make([]Decision, n)}
	queue := o.QueueSize
	if queue <= 0 {
		queue = DefaultDecisionQueueSize
	}
	if o.File != "" {
		l.file = newFileSink(o.File, o.FileMaxBytes, queue)
	}
	if o.URL != "" {
		l.service = newServiceSink(o, l.instance, queue)
	}
	return l
}

// logDecision records the decision the pipeline took for in: outcome o,
// restatement rs (nil when none), taken by revision st in d.
func (p *Pipeline) logDecision(in *engine.ErrorInput, o *engine.Outcome, rs *restatement, st *pipelineState, d time.Duration) {
	now := in.Now
	if now.IsZero() {
		now = p.clock.Now()
	}
	l := p.dlog
	rec := Decision{
		ID:         l.instance + "-" + strconv.FormatUint(l.seq.Add(1), 10),
		Time:       now,
		RequestID:  in.RequestID,
		Provider:   in.Provider,
		Connection: in.Connection,
		Model:      in.Model,
		Profile:    string(in.Profile),
		Status:     in.Status,
		DecisionResult: DecisionResult{
			RestatedStatus:     o.Status,
			Transport:          in.TransportErr != nil,
			RuleID:             o.RuleID,
			RuleSource:         o.RuleSource,
			Reason:             string(o.Reason),
			Scope:              string(o.Scope),
			CooldownMS:         o.CooldownHint.Milliseconds(),
			ClientRetryAfterMS: o.ClientRetryAfter.Milliseconds(),
		},
		Revision:       st.revision,
		BundleRevision: st.bundleRevision,
		DurationNS:     d.Nanoseconds(),
		ErrorCode:      in.ErrorCode,
		ErrorType:      in.ErrorType,
	}
	if rs != nil {
		rec.RestateRuleID, rec.RestateSource = p.redact.String(rs.id), rs.source
	}
	if in.Body != "" {
		rec.Erased = erasedBody
	}
	rec.ErrorCode, rec.ErrorType = p.redact.String(rec.ErrorCode), p.redact.String(rec.ErrorType)
	rec.Headers, rec.Masked = maskHeaders(in.Headers, p.redact)
	l.record(rec)
}

// erasedBody is Decision.Erased when the attempt had a body.
var erasedBody = []string{"/body"}

// maskHeaders copies h with the values of credential-like headers replaced
// by Masked and every other value redacted by r (configured credentials
// and key-shaped tokens), and returns the paths of the values it changed
// ("/headers/<name>", sorted). Names are lower-cased.
func maskHeaders(h map[string]string, r *redact.Redactor) (map[string]string, []string) {
	if len(h) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(h))
	var masked []string
	for k, v := range h {
		k = strings.ToLower(k)
		nv := r.String(v)
		if sensitiveHeader(k, v) {
			nv = Masked
		}
		if nv != v {
			masked = append(masked, "/headers/"+k)
		}
		out[k] = nv
	}
	slices.Sort(masked)
	return out, masked
}

// sensitiveHeader reports whether header name (lower-cased) with value v
// may carry a credential: a name that speaks of authorization, a secret,
// a password, a cookie, a session or an API key, or ends in "-token" or
// "-key" (rate-limit headers such as x-ratelimit-remaining-tokens are
// kept), or a value that carries an authorization scheme.
func sensitiveHeader(name, v string) bool {
	if redact.IsCredentialHeader(name) {
		return true
	}
	for _, s := range [...]string{"auth", "secret", "password", "cookie", "session", "api-key", "apikey"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	for _, s := range [...]string{"-token", "_token", "-key", "_key"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	lv := strings.ToLower(strings.TrimSpace(v))
	return strings.HasPrefix(lv, "bearer ") || strings.HasPrefix(lv, "basic ")
}

// record puts rec in the ring buffer and offers it to the sinks.
func (l *decisionLog) record(rec Decision) {
	l.mu.Lock()
	l.ring[l.next] = rec
	l.next = (l.next + 1) % len(l.ring)
	l.size = min(l.size+1, len(l.ring))
	l.mu.Unlock()
	if l.file != nil {
		l.file.offer(&rec)
	}
	if l.service != nil {
		l.service.offer(&rec)
	}
}

// recent returns up to limit decisions, newest first (all buffered ones
// when limit ≤ 0).
func (l *decisionLog) recent(limit int) []Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.size
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]Decision, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, l.ring[(l.next-i+len(l.ring))%len(l.ring)])
	}
	return out
}

func (l *decisionLog) status() *DecisionLogStatus {
	l.mu.Lock()
	s := &DecisionLogStatus{Recorded: l.seq.Load(), Buffered: l.size, Capacity: len(l.ring)}
	l.mu.Unlock()
	if l.file != nil {
		s.File = l.file.status()
	}
	if l.service != nil {
		s.Service = l.service.status()
	}
	return s
}

// Decisions returns up to limit recent failure-path decisions, newest
// first (every buffered one when limit ≤ 0); none when the pipeline has
// no decision log. It is goroutine-safe.
func (p *Pipeline) Decisions(limit int) []Decision {
	if p.dlog == nil {
		return []Decision{}
	}
	return p.dlog.recent(limit)
}

// sinkCounters are the counters every sink keeps.
type sinkCounters struct {
	written, dropped, failures atomic.Uint64
	mu                         sync.Mutex
	lastErr                    string
	lastWrite                  time.Time
}

func (c *sinkCounters) failed(err error) {
	c.failures.Add(1)
	c.mu.Lock()
	c.lastErr = err.Error()
	c.mu.Unlock()
}

func (c *sinkCounters) wrote(n int, at time.Time) {
	c.written.Add(uint64(n))
	c.mu.Lock()
	c.lastErr, c.lastWrite = "", at
	c.mu.Unlock()
}

func (c *sinkCounters) status(target string, queued int) *SinkStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &SinkStatus{Target: target, Written: c.written.Load(), Dropped: c.dropped.Load(), Queued: queued,
		Failures: c.failures.Load(), LastError: c.lastErr, LastWrite: c.lastWrite}
}

// enqueue offers rec to queue without blocking, counting a drop when it is
// full.
func (c *sinkCounters) enqueue(queue chan Decision, rec *Decision) {
	select {
	case queue <- *rec:
	default:
		c.dropped.Add(1)
	}
}
