package policies

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// OperatorRulesKey is the engine.Store key holding the operator rules, as
// a JSON array of OperatorRule.
const OperatorRulesKey = "policies/operator-rules"

// OperatorRule is one classification or restatement rule an operator
// declares at runtime, without recompiling (docs/resilience.md §11). Operator
// rules are consulted before every other rule.
//
// A rule matches a failed attempt of Provider when every optional matcher
// given holds: Status equals the upstream status or the restated one;
// Match occurs in the body (a case-insensitive substring, or a regular
// expression written /like this/, matched as written: add (?i) for case
// insensitivity); Header is present ("name") or has the value ("name=value",
// compared case-insensitively).
//
// Declaring a rule for a provider is itself the opt-in to two things for
// the failures that rule matches: full body text (Match sees the whole body
// the gateway read, not the 64 KiB prefix Rego policies get) and honoured
// scope (Scope is used verbatim in the Outcome; it is never defaulted or
// narrowed, and because the Outcome's RuleSource is "operator" the engine
// treats it as an explicit scope: a "connection" rule never arms a model
// lockout, a "model" rule never cools the connection).
//
// A rule with RestateTo restates the upstream status (before any
// classification, §10); a rule with Reason classifies; a rule may do both.
type OperatorRule struct {
	// Provider is the provider id the rule is for. Required.
	Provider string `json:"provider"`
	// Status is the status to match, 0 for any.
	Status int `json:"status,omitempty"`
	// Match is a body substring (case-insensitive) or a /regex/.
	Match string `json:"match,omitempty"`
	// Header is a response header name, or name=value.
	Header string `json:"header,omitempty"`
	// Scope is model, connection or provider; required with Reason.
	Scope string `json:"scope,omitempty"`
	// Reason is an engine reason name (rate_limit, quota_exhausted, ...).
	Reason string `json:"reason,omitempty"`
	// CooldownMS, when positive, is the lock duration the rule sets (capped
	// at 30 days). For a restating rule it is also the Retry-After told to
	// the client when the upstream gave no retry hint.
	CooldownMS int64 `json:"cooldown_ms,omitempty"`
	// RestateTo, when set, is the status the upstream status is restated to.
	RestateTo int `json:"restate_to,omitempty"`
	// ID names the rule in outcomes; when empty a stable id is derived
	// from the rule's content ("op-" and 10 hex digits).
	ID string `json:"id,omitempty"`
}

// ruleReasons are the reasons a rule (operator, plugin or Rego) may give.
var ruleReasons = []engine.Reason{
	engine.ReasonRateLimit, engine.ReasonQuotaExhausted, engine.ReasonConcurrencyLimited,
	engine.ReasonAuthError, engine.ReasonCreditsExhausted, engine.ReasonBanned,
	engine.ReasonExpired, engine.ReasonRequestRejected, engine.ReasonNotFound,
	engine.ReasonTransient, engine.ReasonServerError, engine.ReasonBadRequest,
	engine.ReasonToolLimit,
}

// ruleScopes are the scopes a rule may give.
var ruleScopes = []engine.Scope{engine.ScopeModel, engine.ScopeConnection, engine.ScopeProvider}

func validReason(r string) (engine.Reason, bool) {
	for _, x := range ruleReasons {
		if string(x) == r {
			return x, true
		}
	}
	return "", false
}

func validScope(s string) (engine.Scope, bool) {
	for _, x := range ruleScopes {
		if string(x) == s {
			return x, true
		}
	}
	return "", false
}

func reasonNames() string {
	names := make([]string, len(ruleReasons))
	for i, r := range ruleReasons {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

var ruleIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// compiledRule is a validated OperatorRule ready to match.
type compiledRule struct {
	OperatorRule
	reason      engine.Reason
	scope       engine.Scope
	cooldown    time.Duration
	matchLower  string         // lower-cased substring, when not a regex
	matchRegexp *regexp.Regexp // when Match is /.../
	required    literals       // of matchRegexp, looked for first
	headerName  string         // lower-cased
	headerValue string         // lower-cased; "" with hasValue false: presence only
	hasValue    bool
}

// ruleError is a validation error of one field of one rule.
func ruleError(i int, field, msg string) error {
	return fmt.Errorf("rules[%d].%s: %s", i, field, msg)
}

// compileRules validates rules and compiles them, filling in generated ids.
// The error names the first bad rule's index and field.
func compileRules(rules []OperatorRule) ([]compiledRule, error) {
	out := make([]compiledRule, 0, len(rules))
	seen := make(map[string]int, len(rules))
	for i, r := range rules {
		c, err := compileRule(i, r)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[c.ID]; dup {
			return nil, ruleError(i, "id", fmt.Sprintf("%q duplicates rules[%d]", c.ID, j))
		}
		seen[c.ID] = i
		out = append(out, c)
	}
	return out, nil
}

func compileRule(i int, r OperatorRule) (compiledRule, error) {
	c := compiledRule{OperatorRule: r}
	if strings.TrimSpace(r.Provider) == "" {
		return c, ruleError(i, "provider", "required")
	}
	if r.Status != 0 && (r.Status < 100 || r.Status > 599) {
		return c, ruleError(i, "status", "must be 0 (any) or an HTTP status 100..599")
	}
	if r.RestateTo != 0 && (r.RestateTo < 100 || r.RestateTo > 599) {
		return c, ruleError(i, "restate_to", "must be an HTTP status 100..599")
	}
	if r.Reason == "" && r.RestateTo == 0 {
		return c, ruleError(i, "reason", "required unless restate_to is set")
	}
	if r.Reason != "" {
		reason, ok := validReason(r.Reason)
		if !ok {
			return c, ruleError(i, "reason", "must be one of "+reasonNames())
		}
		c.reason = reason
	}
	switch {
	case r.Scope != "":
		scope, ok := validScope(r.Scope)
		if !ok {
			return c, ruleError(i, "scope", "must be one of model, connection, provider")
		}
		c.scope = scope
	case r.Reason != "":
		return c, ruleError(i, "scope", "must be one of model, connection, provider")
	}
	if r.CooldownMS < 0 || time.Duration(r.CooldownMS) > engine.MaxUpstreamHint/time.Millisecond {
		return c, ruleError(i, "cooldown_ms", "must be between 0 and 2592000000 (30 days)")
	}
	c.cooldown = time.Duration(r.CooldownMS) * time.Millisecond
	if m := r.Match; len(m) >= 2 && strings.HasPrefix(m, "/") && strings.HasSuffix(m, "/") {
		if len(m) == 2 {
			return c, ruleError(i, "match", "empty regular expression")
		}
		re, err := regexp.Compile(m[1 : len(m)-1])
		if err != nil {
			return c, ruleError(i, "match", "invalid regular expression: "+err.Error())
		}
		c.matchRegexp, c.required = re, requiredLiterals(m[1:len(m)-1])
	} else {
		c.matchLower = strings.ToLower(m)
	}
	if r.Header != "" {
		name, value, hasValue := strings.Cut(r.Header, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" || strings.ContainsAny(name, " \t\r\n:") {
			return c, ruleError(i, "header", `must be "name" or "name=value"`)
		}
		c.headerName, c.headerValue, c.hasValue = name, strings.ToLower(strings.TrimSpace(value)), hasValue
	}
	switch {
	case r.ID == "":
		c.ID = ruleID(r)
	case !ruleIDPattern.MatchString(r.ID):
		return c, ruleError(i, "id", "must be 1..128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit")
	}
	return c, nil
}

// ruleID derives a stable id from a rule's content.
func ruleID(r OperatorRule) string {
	r.ID = ""
	raw, _ := json.Marshal(r) // a struct of strings and ints cannot fail
	sum := sha256.Sum256(raw)
	return "op-" + hex.EncodeToString(sum[:5])
}

// errorView is what operator rules match one failed attempt against.
type errorView struct {
	in       *engine.ErrorInput
	original int
	status   int // after restatement so far
	lower    string
	lowered  bool
	// foldASCII: 1 when no character of the body folds to an ASCII
	// letter but ASCII letters, -1 when one does, 0 before the look.
	foldASCII int8
}

// body returns the lower-cased full body, computed once.
func (v *errorView) lowerBody() string {
	if !v.lowered {
		v.lower, v.lowered = strings.ToLower(v.in.Body), true
	}
	return v.lower
}

// foldsLikeASCII reports, looked at once, that the body holds neither
// U+017F nor U+212A: no character but an ASCII letter folds (as (?i)
// matches) to an ASCII letter.
func (v *errorView) foldsLikeASCII() bool {
	if v.foldASCII == 0 {
		v.foldASCII = -1
		if b := v.in.Body; ascii(b) || !strings.Contains(b, "\u017f") && !strings.Contains(b, "\u212a") {
			v.foldASCII = 1
		}
	}
	return v.foldASCII == 1
}

// matches reports whether rule c matches the attempt; restating rules
// match Status against the upstream status only.
func (c *compiledRule) matches(v *errorView, restating bool) bool {
	if c.Provider != v.in.Provider {
		return false
	}
	if c.Status != 0 && c.Status != v.original && (restating || c.Status != v.status) {
		return false
	}
	if c.headerName != "" {
		got, ok := v.in.Headers[c.headerName]
		if !ok {
			got, ok = headerFold(v.in.Headers, c.headerName)
		}
		if !ok || (c.hasValue && strings.ToLower(strings.TrimSpace(got)) != c.headerValue) {
			return false
		}
	}
	switch {
	case c.matchRegexp != nil:
		return !c.required.absent(v) && c.matchRegexp.MatchString(v.in.Body)
	case c.matchLower != "":
		return strings.Contains(v.lowerBody(), c.matchLower)
	}
	return true
}

// headerFold looks a header up case-insensitively (the gateway lower-cases
// names, but a caller may not have).
func headerFold(h map[string]string, name string) (string, bool) {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// SetOperatorRules validates rules, persists them under OperatorRulesKey
// (when the pipeline has a Store) and applies them atomically: failures
// classified after it returns see the new rules, in-flight ones finish with
// the old. An invalid rule returns an error naming its index and field
// ("rules[2].scope: must be one of model, connection, provider"); a store
// failure an error wrapping it; either way nothing changes. Rules without
// an ID get a stable generated one. It is goroutine-safe.
func (p *Pipeline) SetOperatorRules(ctx context.Context, rules []OperatorRule) error {
	compiled, err := compileRules(rules)
	if err != nil {
		return fmt.Errorf("operator rules: %w", err)
	}
	stored := make([]OperatorRule, len(compiled))
	for i, c := range compiled {
		stored[i] = c.OperatorRule
	}
	raw, err := json.Marshal(stored)
	if err != nil {
		return fmt.Errorf("operator rules: encode: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.store != nil {
		if err := p.store.Put(ctx, OperatorRulesKey, raw, 0); err != nil {
			return fmt.Errorf("operator rules: persist %s: %w", OperatorRulesKey, err)
		}
	}
	next := *p.state.Load()
	next.rules = compiled
	p.state.Store(&next)
	p.log.Info("operator rules applied", "count", len(compiled))
	return nil
}

// OperatorRules returns a copy of the operator rules in force, with their
// ids. It is goroutine-safe.
func (p *Pipeline) OperatorRules() []OperatorRule {
	st := p.state.Load()
	out := make([]OperatorRule, len(st.rules))
	for i, c := range st.rules {
		out[i] = c.OperatorRule
	}
	return out
}

// loadOperatorRules reads the persisted rules; absent means none.
func loadOperatorRules(ctx context.Context, store engine.Store) ([]compiledRule, error) {
	if store == nil {
		return nil, nil
	}
	raw, ok, err := store.Get(ctx, OperatorRulesKey)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", OperatorRulesKey, err)
	}
	if !ok {
		return nil, nil
	}
	var rules []OperatorRule
	if err := json.Unmarshal(raw, &rules); err != nil {
		return nil, fmt.Errorf("decode %s: %w", OperatorRulesKey, err)
	}
	compiled, err := compileRules(rules)
	if err != nil {
		return nil, fmt.Errorf("persisted %s: %w", OperatorRulesKey, err)
	}
	return compiled, nil
}
