package policies

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// Explanation shows how the pipeline judged one failed attempt, for the
// explain API.
type Explanation struct {
	// RestatedStatus is the status after restatement (the upstream status
	// when nothing restated it).
	RestatedStatus int    `json:"restated_status"`
	RuleID         string `json:"rule_id"`
	// Source is "operator", "plugin", "builtin" or "default".
	Source     string `json:"source"`
	Reason     string `json:"reason"`
	Scope      string `json:"scope"`
	CooldownMS int64  `json:"cooldown_ms"`
	// Trace lists each stage's decision, in evaluation order.
	Trace []string `json:"trace"`
}

// Explain classifies in like Classify and reports each stage's decision.
// It is goroutine-safe and has no side effects beyond Classify's. The
// trace is redacted (Options.Redactor) as the Outcome's message is.
func (p *Pipeline) Explain(in engine.ErrorInput) Explanation {
	tr := &tracer{}
	tr.addf("revision %s", p.Revision())
	o, _ := p.run(context.Background(), in, tr)
	tr.addf("outcome: status %d, %s, retryable %t, permanent %t", o.Status, describe(o.Reason, o.Scope, o.CooldownHint), o.Retryable, o.Permanent)
	if o.RestatedFrom != 0 {
		tr.addf("restated from %d; client retry-after %s", o.RestatedFrom, o.ClientRetryAfter)
	}
	return Explanation{
		RestatedStatus: o.Status,
		RuleID:         o.RuleID,
		Source:         o.RuleSource,
		Reason:         string(o.Reason),
		Scope:          string(o.Scope),
		CooldownMS:     o.CooldownHint.Milliseconds(),
		Trace:          p.redactAll(tr.lines),
	}
}

// redactAll redacts each line in place.
func (p *Pipeline) redactAll(lines []string) []string {
	for i, l := range lines {
		lines[i] = p.redact.String(l)
	}
	return lines
}

// describe renders a decision for traces.
func describe(r engine.Reason, s engine.Scope, cooldown time.Duration) string {
	out := string(r)
	if s != "" {
		out += "/" + string(s)
	}
	if cooldown > 0 {
		out += " cooldown " + cooldown.String()
	}
	return out
}

// tracer collects Explain's trace; a nil tracer records nothing, so the
// Classify path formats no strings.
type tracer struct {
	lines []string
}

func (t *tracer) addf(format string, args ...any) {
	if t != nil {
		t.lines = append(t.lines, fmt.Sprintf(format, args...))
	}
}

// input records the attempt judged. It formats nothing for a nil tracer
// (arguments to addf would be boxed even then).
func (t *tracer) input(in *engine.ErrorInput) {
	if t != nil {
		t.addf("input: provider=%s status=%d body=%d bytes", in.Provider, in.Status, len(in.Body))
	}
}

// defaulted records that engine.DefaultClassifier's outcome o stands.
func (t *tracer) defaulted(o *engine.Outcome) {
	if t != nil {
		t.addf("default: %s → %s", o.RuleID, describe(o.Reason, o.Scope, 0))
	}
}

func (t *tracer) restate(stage string, rs *restatement, original int) {
	if t == nil {
		return
	}
	if rs == nil {
		t.addf("restate %s: no match", stage)
		return
	}
	line := "restate " + stage + ": " + rs.source + " rule " + rs.id + ": " + strconv.Itoa(original) + " → " + strconv.Itoa(rs.to)
	if rs.retryAfter > 0 {
		line += " (default client retry-after " + rs.retryAfter.String() + ")"
	}
	t.lines = append(t.lines, line)
}

func (t *tracer) classify(stage string, d *decision) {
	if t == nil {
		return
	}
	if d == nil {
		t.addf("classify %s: no match", stage)
		return
	}
	t.addf("classify %s: rule %s → %s", stage, d.id, describe(d.reason, d.scope, d.cooldown))
}
