package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/plugins/abi"
)

// Restate runs the restate hook of the plugins that declare it, in spec
// order, and returns the first answer. It returns false when no plugin
// answers (or every one failed): the caller keeps its built-in
// restatement. An empty RuleID becomes "plugin.<name>".
func (h *Host) Restate(ctx context.Context, in abi.ErrorInput) (abi.Restatement, bool) {
	ps := h.plugins(hookRestate)
	if len(ps) == 0 {
		return abi.Restatement{}, false
	}
	var out abi.Restatement
	p := dispatch(ctx, ps, hookRestate, errorInputEncoder(in), func(b []byte, binary bool) error {
		return decodeAnswer(b, binary, abi.DecodeRestatementBinary, validRestatement, &out)
	})
	if p == nil {
		return abi.Restatement{}, false
	}
	if out.RuleID == "" {
		out.RuleID = p.defaultRuleID
	}
	return out, true
}

// Classify runs the classify hook of the plugins that declare it, in spec
// order, and returns the first decision. It returns false when no plugin
// decides (or every one failed): the caller uses its built-in
// classification. An empty RuleID becomes "plugin.<name>".
func (h *Host) Classify(ctx context.Context, in abi.ErrorInput) (abi.Decision, bool) {
	ps := h.plugins(hookClassify)
	if len(ps) == 0 {
		return abi.Decision{}, false
	}
	var out abi.Decision
	p := dispatch(ctx, ps, hookClassify, errorInputEncoder(in), func(b []byte, binary bool) error {
		return decodeAnswer(b, binary, decodeDecisionBinary, validDecision, &out)
	})
	if p == nil {
		return abi.Decision{}, false
	}
	if out.RuleID == "" {
		out.RuleID = p.defaultRuleID
	}
	return out, true
}

// OnRequest runs the on_request hook of the plugins that declare it, in
// spec order, and returns the first action. It returns false when no
// plugin acts (or every one failed): the request goes on unchanged.
func (h *Host) OnRequest(ctx context.Context, in abi.RequestInfo) (abi.RequestAction, bool) {
	ps := h.plugins(hookOnRequest)
	if len(ps) == 0 {
		return abi.RequestAction{}, false
	}
	in.Headers = withoutCredentials(in.Headers)
	var out abi.RequestAction
	p := dispatch(ctx, ps, hookOnRequest, func(binary bool) ([]byte, error) {
		if binary {
			return abi.AppendRequestInfoBinary(nil, &in), nil
		}
		return json.Marshal(in)
	}, func(b []byte, binary bool) error {
		return decodeAnswer(b, binary, abi.DecodeRequestActionBinary, validRequestAction, &out)
	})
	if p == nil {
		return abi.RequestAction{}, false
	}
	return out, true
}

// decodeAnswer decodes a hook answer b in the guest's encoding into out
// (binary with fromBinary, else JSON) and validates it.
func decodeAnswer[T any](b []byte, binary bool, fromBinary func([]byte) (T, error), valid func(*T) error, out *T) error {
	var err error
	if binary {
		*out, err = fromBinary(b)
	} else {
		var zero T
		*out = zero
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		return err
	}
	return valid(out)
}

// decodeDecisionBinary decodes a binary Decision, interning known names.
func decodeDecisionBinary(b []byte) (abi.Decision, error) {
	return abi.DecodeDecisionBinary(b, decisionNames)
}

// plugins returns the plugins running hook kind, in spec order; none for a
// nil Host.
func (h *Host) plugins(kind hookKind) []*plugin {
	if h == nil {
		return nil
	}
	return h.set.Load().byHook[kind]
}

// encodeFunc encodes a hook input in the binary encoding or in JSON.
type encodeFunc func(binary bool) ([]byte, error)

// decodeFunc decodes and validates a hook answer in the binary encoding or
// in JSON; b is a view of guest memory, valid only during the call.
type decodeFunc func(b []byte, binary bool) error

// dispatch offers the input to each plugin in turn, encoding it at most
// once per encoding, and returns the plugin whose answer decode accepted,
// or nil.
func dispatch(ctx context.Context, ps []*plugin, kind hookKind, encode encodeFunc, decode decodeFunc) *plugin {
	var encoded [2][]byte
	for _, p := range ps {
		if ctx.Err() != nil {
			return nil
		}
		binary := p.binary()
		e := 0
		if binary {
			e = 1
		}
		if encoded[e] == nil {
			input, err := encode(binary)
			if err != nil {
				// The inputs are plain strings, ints and maps; this cannot happen.
				p.log.Error("cannot encode hook input", "hook", hookNames[kind], "error", err)
				return nil
			}
			encoded[e] = input
		}
		if answered, _ := p.invoke(ctx, kind, encoded[e], decode); answered {
			return p
		}
	}
	return nil
}

// errCallerGone marks a call abandoned because the caller's context ended;
// it is not the plugin's failure.
var errCallerGone = errors.New("caller's context ended")

// errRetired marks a call on a plugin unloaded meanwhile.
var errRetired = errors.New("plugin unloaded")

// invoke runs one hook call and accounts for it: calls, latency, and on
// failure the error count, last error and a (rate-limited) log line. It
// reports whether the plugin answered, and why it failed (errCallerGone
// and errRetired are not counted as the plugin's errors).
func (p *plugin) invoke(ctx context.Context, kind hookKind, input []byte, decode decodeFunc) (bool, error) {
	p.gate.RLock()
	defer p.gate.RUnlock()
	if p.closed {
		return false, errRetired
	}
	start := time.Now()
	answered, err := p.run(ctx, kind, input, decode)
	if errors.Is(err, errCallerGone) {
		return false, err
	}
	p.lat.add(time.Since(start))
	p.calls.Add(1)
	if err != nil {
		p.errors.Add(1)
		p.setLastError(err)
		if ok, suppressed := p.errLog.allow(time.Now()); ok {
			p.log.Warn("hook failed; using the built-in decision", "hook", hookNames[kind],
				"error", p.redact.String(err.Error()), "suppressed_since_last", suppressed)
		}
		return false, err
	}
	return answered, nil
}

// run makes one call on a pinned instance. The instance goes back to the
// pool unless the call trapped or overran its deadline.
func (p *plugin) run(ctx context.Context, kind hookKind, input []byte, decode decodeFunc) (bool, error) {
	in, err := p.acquire(ctx)
	if err != nil {
		return false, err
	}
	in.logLines = 0
	healthy := false
	defer func() {
		if healthy {
			p.release(ctx, in)
		} else {
			in.close(ctx)
		}
	}()

	if uint32(len(input)) > in.bufCap || in.buf == 0 {
		size := max(uint32(len(input)), 4096)
		in.stack[0] = uint64(size)
		if err := in.call(ctx, in.alloc, in.stack[:], p.timeout); err != nil {
			return false, p.callError(ctx, abi.ExportAlloc, err)
		}
		in.buf, in.bufCap = uint32(in.stack[0]), size
	}
	if !in.mem.Write(in.buf, input) {
		return false, fmt.Errorf("%s returned a buffer outside memory (ptr %d, %d bytes)", abi.ExportAlloc, in.buf, len(input))
	}
	in.stack[0], in.stack[1] = uint64(in.buf), uint64(len(input))
	export := hookExports[kind]
	if err := in.call(ctx, in.hooks[kind], in.stack[:], p.timeout); err != nil {
		return false, p.callError(ctx, export, err)
	}
	healthy = true
	if in.stack[0] == 0 {
		return false, nil
	}
	ptr, n := abi.UnpackPtrLen(in.stack[0])
	if n > abi.MaxAnswerBytes {
		return false, fmt.Errorf("%s answered %d bytes, more than %d", export, n, abi.MaxAnswerBytes)
	}
	view, ok := in.mem.Read(ptr, n)
	if !ok {
		return false, fmt.Errorf("%s answered out of bounds (ptr %d, %d bytes, memory %d bytes)", export, ptr, n, in.mem.Size())
	}
	if err := decode(view, p.binary()); err != nil {
		return false, fmt.Errorf("%s answered an invalid %s answer %.64q: %w", export, p.encodingName(), view, err)
	}
	return true, nil
}

// callError names a failed export call: the caller went away, the call
// overran its deadline, or the guest trapped.
func (p *plugin) callError(ctx context.Context, export string, err error) error {
	if ctx.Err() != nil {
		return errCallerGone
	}
	if errors.Is(err, errDeadline) {
		return fmt.Errorf("%s timed out after %v; instance closed", export, p.timeout)
	}
	return fmt.Errorf("%s trapped: %w", export, err)
}

// credentialHeaders are never passed to guests.
var credentialHeaders = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"x-api-key":           true,
	"api-key":             true,
	"x-goog-api-key":      true,
	"cookie":              true,
	"set-cookie":          true,
}

// withoutCredentials returns h without credential headers, copying it only
// when it has one.
func withoutCredentials(h map[string]string) map[string]string {
	found := false
	for k := range h {
		if credentialHeaders[strings.ToLower(k)] {
			found = true
			break
		}
	}
	if !found {
		return h
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		if !credentialHeaders[strings.ToLower(k)] {
			out[k] = v
		}
	}
	return out
}

// errorInputEncoder returns the encoder of in for a guest: no credential
// headers, Body cut to abi.MaxBodyBytes on a rune boundary.
func errorInputEncoder(in abi.ErrorInput) encodeFunc {
	in.Headers = withoutCredentials(in.Headers)
	if len(in.Body) > abi.MaxBodyBytes {
		cut := abi.MaxBodyBytes
		for cut > 0 && !utf8.RuneStart(in.Body[cut]) {
			cut--
		}
		in.Body = in.Body[:cut]
	}
	return func(binary bool) ([]byte, error) {
		if binary {
			return abi.AppendErrorInputBinary(nil, &in), nil
		}
		return json.Marshal(in)
	}
}

// pluginReasons are the reasons a classify hook may return: every engine
// reason except success and the local ones, which never describe upstream
// health.
var pluginReasons = map[string]bool{
	string(engine.ReasonRateLimit):          true,
	string(engine.ReasonQuotaExhausted):     true,
	string(engine.ReasonConcurrencyLimited): true,
	string(engine.ReasonAuthError):          true,
	string(engine.ReasonCreditsExhausted):   true,
	string(engine.ReasonBanned):             true,
	string(engine.ReasonExpired):            true,
	string(engine.ReasonRequestRejected):    true,
	string(engine.ReasonNotFound):           true,
	string(engine.ReasonTransient):          true,
	string(engine.ReasonServerError):        true,
	string(engine.ReasonNetworkError):       true,
	string(engine.ReasonBadRequest):         true,
	string(engine.ReasonStreamStall):        true,
}

// decisionNames interns the reason and scope names of binary decisions.
var decisionNames = func() map[string]string {
	m := make(map[string]string, len(pluginReasons)+3)
	for r := range pluginReasons {
		m[r] = r
	}
	for _, s := range []engine.Scope{engine.ScopeModel, engine.ScopeConnection, engine.ScopeProvider} {
		m[string(s)] = string(s)
	}
	return m
}()

func validDecision(d *abi.Decision) error {
	if !pluginReasons[d.Reason] {
		return fmt.Errorf("unknown reason %q", d.Reason)
	}
	switch engine.Scope(d.Scope) {
	case engine.ScopeNone, engine.ScopeModel, engine.ScopeConnection, engine.ScopeProvider:
	default:
		return fmt.Errorf("unknown scope %q", d.Scope)
	}
	if d.CooldownMS < 0 {
		return fmt.Errorf("negative cooldown_ms %d", d.CooldownMS)
	}
	return nil
}

func validRestatement(r *abi.Restatement) error {
	if r.Status < 100 || r.Status > 599 {
		return fmt.Errorf("status %d is not an HTTP status", r.Status)
	}
	if r.RetryAfterMS < 0 {
		return fmt.Errorf("negative retry_after_ms %d", r.RetryAfterMS)
	}
	return nil
}

func validRequestAction(a *abi.RequestAction) error {
	if a.RejectStatus != 0 && (a.RejectStatus < 400 || a.RejectStatus > 499) {
		return fmt.Errorf("reject_status %d is not a client error", a.RejectStatus)
	}
	for k, v := range a.SetHeaders {
		if !validHeaderName(k) {
			return fmt.Errorf("invalid header name %q", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("invalid value for header %q", k)
		}
	}
	return nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
