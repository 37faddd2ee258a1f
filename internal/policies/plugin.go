package policies

import (
	"context"
	"fmt"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/plugins/abi"
)

// PluginHook is the part of the WASM plugin host the pipeline uses: the
// restate and classify hooks of the loaded plugins. Each returns ok false
// when no plugin answered. The pipeline consults Restate only when no rule
// restated the status, and Classify after the operator rules and before the
// operator .rego policies. An answer with an unknown reason or scope, an
// invalid status or a negative duration is counted, logged and ignored; the
// pipeline continues with the next stage. Implementations are
// goroutine-safe and bound their own run time.
type PluginHook interface {
	Restate(ctx context.Context, in abi.ErrorInput) (abi.Restatement, bool)
	Classify(ctx context.Context, in abi.ErrorInput) (abi.Decision, bool)
}

// pluginInput converts in, with status, for the plugin hooks.
func pluginInput(in *engine.ErrorInput, status int) abi.ErrorInput {
	return abi.ErrorInput{
		Provider:   in.Provider,
		Connection: in.Connection,
		Model:      in.Model,
		Profile:    string(in.Profile),
		Status:     status,
		Headers:    in.Headers,
		ErrorCode:  in.ErrorCode,
		ErrorType:  in.ErrorType,
		Body:       boundBody(in.Body),
	}
}

// pluginRestate asks the plugin hook to restate status; an answer that is
// not a valid HTTP status is counted, logged and ignored, one equal to
// status is no restatement.
func (p *Pipeline) pluginRestate(ctx context.Context, in *engine.ErrorInput, status int) *restatement {
	r, ok := p.plugins.Restate(ctx, pluginInput(in, status))
	if !ok {
		return nil
	}
	if r.Status < 100 || r.Status > 599 || r.RetryAfterMS < 0 {
		p.ignorePlugin("restate", r.RuleID, fmt.Sprintf("status %d, retry_after_ms %d", r.Status, r.RetryAfterMS))
		return nil
	}
	if r.Status == status {
		return nil
	}
	id := r.RuleID
	if id == "" {
		id = "plugin.restate"
	}
	return &restatement{source: SourcePlugin, id: id, to: r.Status, retryAfter: time.Duration(r.RetryAfterMS) * time.Millisecond}
}

// pluginClassify asks the plugin hook for a decision; one with an unknown
// reason or scope, or a negative cooldown, is counted, logged and ignored.
func (p *Pipeline) pluginClassify(ctx context.Context, in *engine.ErrorInput, status int, tr *tracer) *decision {
	d, ok := p.plugins.Classify(ctx, pluginInput(in, status))
	if !ok {
		return nil
	}
	reason, okR := validReason(d.Reason)
	scope, okS := validScope(d.Scope)
	if d.Scope == "" {
		scope, okS = defaultScope(reason), true
	}
	if !okR || !okS || d.CooldownMS < 0 {
		tr.addf("classify plugin: invalid decision ignored (reason %q, scope %q, cooldown_ms %d)", d.Reason, d.Scope, d.CooldownMS)
		p.ignorePlugin("classify", d.RuleID, fmt.Sprintf("reason %q, scope %q, cooldown_ms %d", d.Reason, d.Scope, d.CooldownMS))
		return nil
	}
	id := d.RuleID
	if id == "" {
		id = "plugin.classify"
	}
	return &decision{source: SourcePlugin, id: id, reason: reason, scope: scope, cooldown: time.Duration(d.CooldownMS) * time.Millisecond}
}

// ignorePlugin counts and logs an ignored plugin answer: the first, then
// every 1000th.
func (p *Pipeline) ignorePlugin(hook, rule, what string) {
	n := p.pluginIgnored.Add(1)
	if n == 1 || n%1000 == 0 {
		p.log.Warn("ignoring an invalid plugin answer", "hook", hook, "rule", rule, "answer", what, "ignored_total", n)
	}
}
