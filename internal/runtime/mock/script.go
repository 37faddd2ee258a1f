package mock

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/breakwater-dev/breakwater/internal/regfile"
)

// Script tells the mock how to answer. Rules are tried in order; the first
// whose key, model and path all match answers the call. A call no rule
// matches gets the default echo answer. A Script must not be modified after
// it is handed to New or SetScript; it is then read by many goroutines.
type Script struct {
	// Rules are matched in order, first match wins.
	Rules []Rule `yaml:"rules"`
	// Models lists the ids GET /v1/models reports; empty means DefaultModels().
	Models []string `yaml:"models"`
	// AnswerTools makes answers without a scripted text call tools: a
	// request that offers tools and carries no tool result yet gets a call
	// of one of them, a request that carries a tool result gets text
	// quoting it (README: "Tool calls").
	AnswerTools bool `yaml:"answer_tools"`
}

// Rule selects calls and lists the responses they get.
type Rule struct {
	// Name is a free label for humans; it is not matched.
	Name string `yaml:"name"`
	// Key matches the caller's API key (Authorization: Bearer K or
	// x-api-key: K). Empty matches every call; `*` is a wildcard.
	Key string `yaml:"key"`
	// Model matches the request's model, `*` matching any run of characters
	// (including `/`). Empty matches every model.
	Model string `yaml:"model"`
	// Path matches the URL path (e.g. /v1/messages), `*` wildcard allowed.
	// Empty matches every generation endpoint (but not the account
	// endpoints GET /api/oauth/usage and POST
	// /api/organizations/{org}/reset_rate_limits, which only rules with a
	// matching, non-empty path answer).
	Path string `yaml:"path"`
	// Header matches one request header: "name=value" needs the header's
	// value to match the glob value (e.g. "anthropic-usage-limit=slow"),
	// "name=" needs the header absent or empty, "name" needs it present
	// and not empty. Names are case-insensitive. Empty matches every call.
	Header string `yaml:"header"`
	// Mode is "sequence" (default): responses are used in order, each
	// Step.Times times, the last one repeating forever; or "random": every
	// call draws one step by Step.Weight from an RNG seeded with Seed.
	Mode string `yaml:"mode"`
	// Seed seeds the random mode's RNG; the same seed and call order give
	// the same draws.
	Seed int64 `yaml:"seed"`
	// Responses are the steps of this rule. Empty means one default step
	// (the echo answer).
	Responses []Step `yaml:"responses"`
	// RateLimit, when set, gives every API key a token bucket for this
	// rule (see RateLimit).
	RateLimit *RateLimit `yaml:"rate_limit"`
}

// Step is one scripted answer. Zero values mean "as the echo default".
type Step struct {
	// Times is how many consecutive calls this step answers in sequence
	// mode (default 1). Ignored in random mode.
	Times int `yaml:"times"`
	// Weight is the relative chance of this step in random mode (default 1;
	// 0 is never drawn while another step has weight).
	Weight *int `yaml:"weight"`
	// Status is the HTTP status (default 200).
	Status int `yaml:"status"`
	// Headers are added to the response (e.g. Retry-After).
	Headers map[string]string `yaml:"headers"`
	// Body, when not empty, is sent as-is instead of a generated answer.
	// When empty and Status >= 400, a realistic provider error JSON for the
	// status is sent in the endpoint's wire format.
	Body string `yaml:"body"`
	// LatencyMS delays the response headers.
	LatencyMS int `yaml:"latency_ms"`
	// FirstByteMS is an alias of LatencyMS; the larger of the two is used.
	FirstByteMS int `yaml:"first_byte_ms"`
	// Chunks is the number of text frames of a streamed answer (default 4;
	// fewer when the text has fewer characters).
	Chunks int `yaml:"chunks"`
	// ChunkIntervalMS is the pause before every content frame but the first.
	ChunkIntervalMS int `yaml:"chunk_interval_ms"`
	// Text overrides the assistant text (default "echo: " + last user
	// message). An explicit empty string gives an empty answer.
	Text *string `yaml:"text"`
	// ReasoningChunks, when > 0, sends reasoning before the text: OpenAI
	// delta.reasoning_content frames, Anthropic a thinking block with
	// thinking_delta frames (plus one empty thinking_delta and a
	// signature_delta). Ignored by /v1/responses.
	ReasoningChunks int `yaml:"reasoning_chunks"`
	// ReasoningText overrides the reasoning text.
	ReasoningText string `yaml:"reasoning_text"`
	// StallAfterChunks, when set, sends that many content frames (0 = none,
	// just the headers and the stream preamble) and then nothing more until
	// the client goes away or StallMS passes; then the response ends without
	// [DONE] / message_stop.
	StallAfterChunks *int `yaml:"stall_after_chunks"`
	// StallMS bounds a stall; 0 stalls until the client goes away.
	StallMS int `yaml:"stall_ms"`
	// Reset closes the connection abruptly (TCP RST) before any header.
	Reset bool `yaml:"reset"`
	// ResetAfterChunks, when set, sends that many content frames and then
	// drops the connection without ending the chunked body. With the same
	// count as a bounded stall, the stall ends in the reset.
	ResetAfterChunks *int `yaml:"reset_after_chunks"`
	// TrickleBytesPerSec, when > 0, sends the answer text (or a raw body) at
	// about this rate in pieces of a tenth of a second; it overrides Chunks
	// and ChunkIntervalMS for the text.
	TrickleBytesPerSec int `yaml:"trickle_bytes_per_sec"`
	// ErrorEvent, when set, sends one SSE error event as the first event of
	// a stream; the stream then ends unless ContinueAfterError.
	ErrorEvent *ErrorEvent `yaml:"error_event"`
	// ContinueAfterError sends the normal stream after ErrorEvent.
	ContinueAfterError bool `yaml:"continue_after_error"`
	// PingEveryMS sends keep-alive frames while a stream waits (between
	// chunks and during a stall): ": ping" comments for OpenAI formats,
	// `event: ping` for Anthropic.
	PingEveryMS int `yaml:"ping_every_ms"`

	// Hostile upstream faults (issue 19's probe), for the gateway's
	// hardening tests.

	// Redirect answers with a redirect to this URL: status 302 (or Status
	// when it is 3xx), a Location header and a short HTML body.
	Redirect string `yaml:"redirect"`
	// EchoKey answers an authentication error (Status, default 401) whose
	// message quotes the caller's key, as OpenAI's "Incorrect API key
	// provided: sk-…" does.
	EchoKey bool `yaml:"echo_key"`
	// KeepaliveOnly answers 200 text/event-stream and then only ":
	// keepalive" comments, every PingEveryMS (default 1000), until StallMS
	// passes (then the body ends, no event sent) or the client leaves.
	KeepaliveOnly bool `yaml:"keepalive_only"`
	// HeaderBytes adds about this many bytes of X-Mock-Filler-N headers to
	// the answer (at most 1 MiB).
	HeaderBytes int `yaml:"header_bytes"`
	// Gzip compresses the answer, whatever it is (streams too, flushed
	// frame by frame), and sends Content-Encoding: gzip although the
	// request did not ask for it.
	Gzip bool `yaml:"gzip"`

	// Answer details, for clients that read them (the compatibility
	// suite).

	// CachedTokens reports that many of the prompt tokens (at most all of
	// them) as read from the prompt cache: OpenAI
	// prompt_tokens_details.cached_tokens, Responses
	// input_tokens_details.cached_tokens, Anthropic cache_read_input_tokens
	// (input_tokens then counts the rest).
	CachedTokens int `yaml:"cached_tokens"`
	// Truncated ends a text answer as cut by the output token limit:
	// finish_reason length, stop_reason max_tokens, Responses status
	// incomplete (incomplete_details.reason max_output_tokens).
	Truncated bool `yaml:"truncated"`

	// JuniperTide is the juniper_tide block of a GET /api/oauth/usage
	// answer (default: arm reset, available, next_available_at null).
	JuniperTide *JuniperTide `yaml:"juniper_tide"`
	// OrganizationID is the anthropic-organization-id header of a usage
	// probe answer: unset sends DefaultOrganizationID, "" sends none.
	OrganizationID *string `yaml:"organization_id"`
	// Result is the result of a POST .../reset_rate_limits answer: reset
	// (default), not_limited, already_used, not_offered or any other text.
	Result string `yaml:"result"`
	// NextAvailableAt, when set, adds next_available_at to a reset answer
	// (RFC 3339 text, or digits for a unix epoch number).
	NextAvailableAt string `yaml:"next_available_at"`
}

// JuniperTide is the session-limit reset block of the usage probe.
type JuniperTide struct {
	// Arm is the experiment arm ("reset" offers the reset).
	Arm string `yaml:"arm"`
	// Available reports that the reset can be claimed now.
	Available bool `yaml:"available"`
	// NextAvailableAt is RFC 3339 text, digits for a unix epoch number, or
	// empty for null.
	NextAvailableAt string `yaml:"next_available_at"`
}

// ErrorEvent is the SSE error event of Step.ErrorEvent. In YAML it is
// `true` (defaults), a string (the error type) or a mapping {type, message}.
type ErrorEvent struct {
	// Type is the error type; empty means "server_error" for OpenAI
	// formats and "overloaded_error" for Anthropic.
	Type string `yaml:"type"`
	// Message is the error message; empty means a realistic default.
	Message string `yaml:"message"`
}

// UnmarshalYAML accepts a bool, a string or a mapping.
func (e *ErrorEvent) UnmarshalYAML(node *yaml.Node) error {
	switch node.Kind {
	case yaml.ScalarNode:
		if node.Tag == "!!bool" {
			var b bool
			if err := node.Decode(&b); err != nil {
				return fmt.Errorf("error_event: %w", err)
			}
			if !b {
				return errors.New("error_event: false is not allowed, omit the field instead")
			}
			*e = ErrorEvent{}
			return nil
		}
		*e = ErrorEvent{Type: node.Value}
		return nil
	case yaml.MappingNode:
		type plain ErrorEvent
		var p plain
		if err := node.Decode(&p); err != nil {
			return fmt.Errorf("error_event: %w", err)
		}
		*e = ErrorEvent(p)
		return nil
	default:
		return fmt.Errorf("line %d: error_event must be true, a string or a mapping", node.Line)
	}
}

// DefaultModels returns what GET /v1/models lists when the script names
// none (a fresh slice on every call).
func DefaultModels() []string {
	return []string{"mock-model", "gpt-4o-mini", "gpt-4o", "claude-haiku-4", "claude-sonnet-4"}
}

// ParseScript decodes a script from YAML or JSON (JSON is YAML) and validates
// it. Unknown fields are errors. Empty input is an empty script.
func ParseScript(data []byte) (*Script, error) {
	s := &Script{}
	if len(bytes.TrimSpace(data)) == 0 {
		return s, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(s); err != nil {
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		return nil, fmt.Errorf("parse mock script: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("invalid mock script: %w", err)
	}
	return s, nil
}

// LoadScript reads and parses the script file at path: a regular file of
// at most 1 MiB, as POST /_mock/script takes.
func LoadScript(path string) (*Script, error) {
	data, err := regfile.Read(path, maxScriptBytes)
	if err != nil {
		return nil, fmt.Errorf("load mock script %s: %w", path, err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Validate reports the first invalid field, naming it by rule and step index.
func (s *Script) Validate() error {
	for i := range s.Rules {
		r := &s.Rules[i]
		where := fmt.Sprintf("rules[%d]", i)
		switch r.Mode {
		case "", "sequence", "random":
		default:
			return fmt.Errorf("%s.mode: %q is not sequence or random", where, r.Mode)
		}
		if r.Header != "" {
			name, _, _ := strings.Cut(r.Header, "=")
			if !validHeaderName(name) {
				return fmt.Errorf("%s.header: %q is not name=value", where, r.Header)
			}
		}
		if r.RateLimit != nil {
			if err := r.RateLimit.validate(); err != nil {
				return fmt.Errorf("%s.%w", where, err)
			}
		}
		totalWeight := 0
		for j := range r.Responses {
			st := &r.Responses[j]
			at := fmt.Sprintf("%s.responses[%d]", where, j)
			if err := st.validate(); err != nil {
				return fmt.Errorf("%s.%w", at, err)
			}
			totalWeight += st.weight()
		}
		if r.Mode == "random" && len(r.Responses) > 0 && totalWeight == 0 {
			return fmt.Errorf("%s: random mode needs at least one response with weight > 0", where)
		}
	}
	return nil
}

func (st *Step) validate() error {
	type check struct {
		name string
		v    int
	}
	for _, c := range []check{
		{"times", st.Times}, {"latency_ms", st.LatencyMS}, {"first_byte_ms", st.FirstByteMS},
		{"chunks", st.Chunks}, {"chunk_interval_ms", st.ChunkIntervalMS},
		{"reasoning_chunks", st.ReasoningChunks}, {"stall_ms", st.StallMS},
		{"trickle_bytes_per_sec", st.TrickleBytesPerSec}, {"ping_every_ms", st.PingEveryMS},
		{"header_bytes", st.HeaderBytes},
	} {
		if c.v < 0 {
			return fmt.Errorf("%s: %d must not be negative", c.name, c.v)
		}
	}
	if st.Weight != nil && *st.Weight < 0 {
		return fmt.Errorf("weight: %d must not be negative", *st.Weight)
	}
	if st.StallAfterChunks != nil && *st.StallAfterChunks < 0 {
		return fmt.Errorf("stall_after_chunks: %d must not be negative", *st.StallAfterChunks)
	}
	if st.ResetAfterChunks != nil && *st.ResetAfterChunks < 0 {
		return fmt.Errorf("reset_after_chunks: %d must not be negative", *st.ResetAfterChunks)
	}
	if st.HeaderBytes > maxHeaderBytes {
		return fmt.Errorf("header_bytes: %d is more than %d", st.HeaderBytes, maxHeaderBytes)
	}
	if st.Status != 0 && (st.Status < 200 || st.Status > 599) {
		return fmt.Errorf("status: %d is not in 200..599", st.Status)
	}
	if st.Redirect != "" && st.Status != 0 && (st.Status < 300 || st.Status > 399) {
		return fmt.Errorf("status: %d is not a redirect (300..399) though redirect is set", st.Status)
	}
	if strings.ContainsAny(st.Redirect, "\r\n") {
		return fmt.Errorf("redirect: %q is not a URL", st.Redirect)
	}
	for k := range st.Headers {
		if !validHeaderName(k) {
			return fmt.Errorf("headers: %q is not a valid header name", k)
		}
	}
	return nil
}

func validHeaderName(k string) bool {
	return k != "" && !strings.ContainsAny(k, " :\r\n")
}

func (st *Step) weight() int {
	if st.Weight == nil {
		return 1
	}
	return *st.Weight
}

func (st *Step) status() int {
	if st.Status == 0 {
		return 200
	}
	return st.Status
}

func (st *Step) latency() time.Duration {
	return time.Duration(max(st.LatencyMS, st.FirstByteMS)) * time.Millisecond
}

// defaultStep is the echo answer used when no rule matches.
var defaultStep = &Step{}

// program is a Script with its run-time state: the per-rule sequence
// positions and random generators. A new program starts fresh.
type program struct {
	script *Script
	rules  []*ruleState
}

type ruleState struct {
	rule *Rule
	// bounds[i] is the number of calls answered by steps 0..i.
	bounds []uint64
	calls  atomic.Uint64

	random      bool
	totalWeight int
	mu          sync.Mutex // guards rng
	rng         *rand.Rand
	limit       *buckets // nil without Rule.RateLimit
}

func compile(s *Script) *program {
	if s == nil {
		s = &Script{}
	}
	p := &program{script: s, rules: make([]*ruleState, len(s.Rules))}
	for i := range s.Rules {
		r := &s.Rules[i]
		rs := &ruleState{rule: r, random: r.Mode == "random"}
		if r.RateLimit != nil {
			rs.limit = newBuckets(r.RateLimit, time.Now)
		}
		var sum uint64
		for j := range r.Responses {
			sum += uint64(max(r.Responses[j].Times, 1))
			rs.bounds = append(rs.bounds, sum)
			rs.totalWeight += r.Responses[j].weight()
		}
		if rs.random {
			seed := uint64(r.Seed)
			rs.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		}
		p.rules[i] = rs
	}
	return p
}

// pick returns the step answering a call, or defaultStep. account calls
// (the usage and reset endpoints) are matched only by rules with a path.
// It is goroutine-safe.
func (p *program) pick(key, model, path string, hdr http.Header, account bool) *Step {
	for _, rs := range p.rules {
		r := rs.rule
		if account && r.Path == "" {
			continue
		}
		if !globMatch(r.Key, key) || !globMatch(r.Model, model) || !globMatch(r.Path, path) || !headerMatch(r.Header, hdr) {
			continue
		}
		if rs.limit != nil {
			return rs.limit.limited(key, rs.step)
		}
		return rs.step()
	}
	return defaultStep
}

// step returns the rule's next step (defaultStep when it has none).
func (rs *ruleState) step() *Step {
	r := rs.rule
	if len(r.Responses) == 0 {
		return defaultStep
	}
	if rs.random {
		return &r.Responses[rs.draw()]
	}
	n := rs.calls.Add(1) - 1
	for j, b := range rs.bounds {
		if n < b {
			return &r.Responses[j]
		}
	}
	return &r.Responses[len(r.Responses)-1]
}

func (rs *ruleState) draw() int {
	rs.mu.Lock()
	x := rs.rng.IntN(rs.totalWeight)
	rs.mu.Unlock()
	steps := rs.rule.Responses
	for j := range steps {
		x -= steps[j].weight()
		if x < 0 {
			return j
		}
	}
	return len(steps) - 1
}

// headerMatch reports whether the request headers satisfy a Rule.Header
// condition ("name=glob", "name=" absent or empty, "name" present).
func headerMatch(cond string, hdr http.Header) bool {
	if cond == "" {
		return true
	}
	name, want, hasValue := strings.Cut(cond, "=")
	got := strings.TrimSpace(hdr.Get(name))
	switch {
	case !hasValue:
		return got != ""
	case want == "":
		return got == ""
	default:
		return globMatch(want, got)
	}
}

// globMatch reports whether s matches pattern, where `*` matches any run of
// characters (including none and including `/`). An empty pattern matches
// everything.
func globMatch(pattern, s string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	if !strings.Contains(pattern, "*") {
		return pattern == s
	}
	prefix, rest, _ := strings.Cut(pattern, "*")
	if !strings.HasPrefix(s, prefix) {
		return false
	}
	s = s[len(prefix):]
	for {
		part, more, found := strings.Cut(rest, "*")
		if !found {
			return len(s) >= len(part) && strings.HasSuffix(s, part)
		}
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
		rest = more
	}
}
