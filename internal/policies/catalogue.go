package policies

import (
	"regexp"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// This file is the built-in catalogue (bundle/restate.rego,
// bundle/classify.rego and the built-in-only queries of
// bundle/pipeline.rego) written in Go: the pipeline evaluates it instead
// of the Rego version while the serving policy set is the built-in bundle
// alone (no operator .rego file, no bundle-server policy), which takes the
// Rego evaluation, most of a failed attempt's cost, off the failure path.
// The Rego bundle stays the catalogue's source of truth: the Go version
// returns the very documents the Rego queries return (the same ast
// objects, so validation, Explain and the decision log see no
// difference), TestGoCatalogueMatchesRego and FuzzGoCatalogue compare the
// two on the bundle's own test inputs, a generated corpus and fuzzed
// inputs, and goCatalogueDigest ties this file to the bundle's text: when
// a catalogue file changes, the Go version switches itself off (and a test
// fails) until it is brought in step again.
//
// Left to Rego, whole: a 429 whose text names a google.rpc.QuotaFailure,
// the only attempts gemini.model_quota can match (it parses the body as
// JSON and walks the google.rpc details), and a Cloudflare daily
// allocation text that arrived at a time before 1970 or past year 37,000
// (Rego's arithmetic there is not a Go integer's).

// goCatalogueDigest is hashSources of the bundle's catalogue files
// (catalogueFiles) this Go version was written and checked against.
const goCatalogueDigest = "b9b697af726d8d33db92ceb740830b332c2fe5b4a98d048bc368e4b6775a3e78"

// catalogueFiles are the bundle files whose rules the Go version mirrors.
var catalogueFiles = []string{"classify.rego", "lib.rego", "pipeline.rego", "restate.rego"}

// catalogueDigest is hashSources of b's catalogue files.
func (b *builtinBundle) catalogueDigest() string {
	var srcs []source
	for _, s := range b.sources {
		if slices.Contains(catalogueFiles, strings.TrimPrefix(s.name, builtinPrefix)) {
			srcs = append(srcs, s)
		}
	}
	return hashSources(srcs)
}

// header is one response header, its name lower-cased.
type header struct{ name, value string }

// catInput is what the built-in catalogue reads of a failed attempt: the
// fields of the Rego input document (see the package documentation) its
// rules look at. The Rego input document of the attempt is built from it
// too (newInputDoc), so both versions judge the same input.
type catInput struct {
	provider       string
	headers        []header // names lower-cased, each name once
	code, typ      string
	body           string // bounded to MaxBodyBytes
	text           string // lower(body + " " + code + " " + typ)
	nowMS          int64
	connection     string
	model, profile string
}

// lowerBody is strings.ToLower(c.body): the start of c.text, which
// lower-cases body, code and type joined by spaces (an ASCII space ends
// any UTF-8 sequence, so lower-casing the three apart gives the same
// bytes).
func (c *catInput) lowerBody() string {
	return c.text[:len(c.text)-len(strings.ToLower(c.code))-len(strings.ToLower(c.typ))-2]
}

// lowerHeaders returns h with lower-cased names. Two names equal but for
// case become one header, the value of the name that sorts first (byte
// order), so that the result does not depend on map order.
func lowerHeaders(h map[string]string) []header {
	out := make([]header, 0, len(h))
	lowered := false
	for name, v := range h {
		if l := strings.ToLower(name); l != name {
			name, lowered = l, true
		}
		out = append(out, header{name, v})
	}
	if !lowered || len(out) < 2 {
		return out
	}
	// Rare: redo it in a fixed order, keeping the first of each name.
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	out = out[:0]
	for _, name := range names {
		l := strings.ToLower(name)
		if !slices.ContainsFunc(out, func(x header) bool { return x.name == l }) {
			out = append(out, header{l, h[name]})
		}
	}
	return out
}

// headerZero reports whether a header whose name starts with prefix has
// the value "0" (spaces trimmed).
func (c *catInput) headerZero(prefix string) bool {
	for _, h := range c.headers {
		if strings.HasPrefix(h.name, prefix) && strings.TrimSpace(h.value) == "0" {
			return true
		}
	}
	return false
}

// hasHeader reports whether header name is present.
func (c *catInput) hasHeader(name string) bool {
	return slices.ContainsFunc(c.headers, func(h header) bool { return h.name == name })
}

// containsAny reports whether s contains one of markers.
func containsAny(s string, markers []string) bool {
	for _, m := range markers {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// newCatEntry builds the document {id, reason, scope, cooldown_ms}.
func newCatEntry(id, reason, scope string, cooldownMS int64) ast.Object {
	k := &resultKeys
	return ast.NewObject(
		[2]*ast.Term{k.id, ast.StringTerm(id)},
		[2]*ast.Term{k.reason, ast.StringTerm(reason)},
		[2]*ast.Term{k.scope, ast.StringTerm(scope)},
		[2]*ast.Term{k.cooldownMS, ast.IntNumberTerm(int(cooldownMS))},
	)
}

// The restatement catalogue (bundle/restate.rego).
var goRestateRules = []struct {
	id                          string
	provider                    string
	from                        []int
	to                          int
	textMarkers, excludeMarkers []string
	obj                         ast.Object // {id, to_status, retry_after_ms}
}{{
	id:             "agentrouter.quota_429",
	provider:       "agentrouter",
	from:           []int{400, 403},
	to:             429,
	textMarkers:    []string{"用户额度不足", "额度不足"},
	excludeMarkers: []string{"无权访问模型"},
	obj: ast.NewObject(
		[2]*ast.Term{ast.StringTerm("id"), ast.StringTerm("agentrouter.quota_429")},
		[2]*ast.Term{ast.StringTerm("to_status"), ast.IntNumberTerm(429)},
		[2]*ast.Term{ast.StringTerm("retry_after_ms"), ast.IntNumberTerm(60000)},
	),
}}

// The classification catalogue's markers (bundle/classify.rego).
var (
	catOpencodeEndpoint = []string{"endpoint is unavailable", "no endpoints available"}
	catOpencodeModel    = []string{"model is disabled", "model is not available", "model not available",
		"model is not supported", "model not supported"}
	catCreditsMarkers = []string{"credit balance is too low", "insufficient balance", "insufficient credits",
		"used all available credits", "余额不足"}
	catBillingTypes = []string{"insufficient_quota", "billing_error"}
	catBillingCodes = []string{"insufficient_quota", "credit_balance_exhausted", "organization_spend_limit_exceeded",
		"project_spend_limit_exceeded", "organization_usage_limit_exceeded"}
	catRevokedMarkers = []string{"has been revoked", "was revoked", "api key revoked", "key has been deactivated",
		"key was deactivated", "key is deactivated", "api key expired", "api key has expired"}
	catQuotaMarkers = []string{"quota", "usage limit", "usage_limit", "daily limit", "weekly limit",
		"monthly limit", "额度不足"}
	catConcurrencyMarkers = []string{"too many concurrent requests", "concurrency limit", "concurrency_limit",
		"concurrent request limit", "parallel request limit", "并发数过高"}
	catToolsMarkers = []string{"too many tools", "tools in your request", "function declarations can be specified",
		"maximum number of tools"}
	catToolsRegexp = regexp.MustCompile(`maximum of [0-9]+ (tools|functions|function declarations)`)
)

// The classification catalogue's constant decisions, in catalogue order.
var (
	catOpencodeEndpointUnavailable = newCatEntry("opencode.endpoint_unavailable", "transient", "model", 300000)
	catOpencodeModelUnavailable    = newCatEntry("opencode.model_unavailable", "not_found", "model", 3600000)
	catMinimaxModelQuota           = newCatEntry("minimax.model_quota", "quota_exhausted", "model", 0)
	catOpenrouterCredits           = newCatEntry("openrouter.credits_402", "credits_exhausted", "connection", 120000)
	catAgentrouterQuota            = newCatEntry("agentrouter.quota", "quota_exhausted", "connection", 0)
	catAgentrouterNoModelAccess    = newCatEntry("agentrouter.no_model_access", "auth_error", "model", 21600000)
	catCreditsBalanceText          = newCatEntry("credits.balance_text", "credits_exhausted", "connection", 0)
	catCreditsBillingError         = newCatEntry("credits.billing_error", "credits_exhausted", "connection", 0)
	catAuthKeyRevoked              = newCatEntry("auth.key_revoked", "expired", "connection", 0)
	catToolsTooMany                = newCatEntry("tools.too_many", "tool_limit", "model", 0)
	catAnthropicModelRateLimit     = newCatEntry("anthropic.model_rate_limit", "rate_limit", "model", 0)
	// catByTextReason are the entries whose reason is text_reason, by it.
	catOpenaiModelRateLimit = map[string]ast.Object{
		"quota_exhausted":     newCatEntry("openai.model_rate_limit", "quota_exhausted", "model", 0),
		"concurrency_limited": newCatEntry("openai.model_rate_limit", "concurrency_limited", "model", 0),
		"rate_limit":          newCatEntry("openai.model_rate_limit", "rate_limit", "model", 0),
	}
	catRemainingZero = map[string]ast.Object{
		"quota_exhausted":     newCatEntry("ratelimit.remaining_zero", "quota_exhausted", "connection", 0),
		"concurrency_limited": newCatEntry("ratelimit.remaining_zero", "concurrency_limited", "connection", 0),
		"rate_limit":          newCatEntry("ratelimit.remaining_zero", "rate_limit", "connection", 0),
	}
)

// msPerDay is a day in milliseconds.
const msPerDay = 86400000

// maxGoNowMS bounds the arrival times (Unix ms) cloudflare.daily_neurons
// is judged in Go: Rego divides in floating point, exact for these
// (2^50 ms is about year 37,600). An arrival time outside [0, maxGoNowMS]
// (a clock gone wrong) is left to Rego.
const maxGoNowMS = 1 << 50

// goRestate is data.breakwater.restate.decision: the first matching
// restatement rule's document, nil when none.
func (c *catInput) goRestate(status int) (to int, obj ast.Object) {
	for i := range goRestateRules {
		r := &goRestateRules[i]
		if r.provider == c.provider && slices.Contains(r.from, status) &&
			!containsAny(c.text, r.excludeMarkers) && containsAny(c.text, r.textMarkers) {
			return r.to, r.obj
		}
	}
	return 0, nil
}

// textReason is text_reason: the reason of a 429 judged by its text.
func (c *catInput) textReason() string {
	switch {
	case containsAny(c.text, catQuotaMarkers):
		return "quota_exhausted"
	case containsAny(c.text, catConcurrencyMarkers):
		return "concurrency_limited"
	}
	return "rate_limit"
}

// anthropicRemainingZero is the header test of anthropic.model_rate_limit.
func (c *catInput) anthropicRemainingZero() bool {
	for _, h := range c.headers {
		if strings.HasPrefix(h.name, "anthropic-ratelimit-") && strings.HasSuffix(h.name, "-remaining") &&
			!strings.Contains(h.name, "unified") && strings.TrimSpace(h.value) == "0" {
			return true
		}
	}
	return false
}

// tooManyTools is too_many_tools.
func (c *catInput) tooManyTools() bool {
	return strings.Contains(c.text, "'tools'") && strings.Contains(c.text, "array too long") ||
		containsAny(c.text, catToolsMarkers) || catToolsRegexp.MatchString(c.text)
}

// goDecisionFor is data.breakwater.classify.decision_for(status): the
// first matching entry's document, nil when none. ok is false when the
// attempt reaches an entry left to Rego (see the top of this file).
func (c *catInput) goDecisionFor(status int) (obj ast.Object, ok bool) {
	t := c.text
	switch c.provider {
	case "opencode":
		if containsAny(t, catOpencodeEndpoint) {
			return catOpencodeEndpointUnavailable, true
		}
		if status == 400 && containsAny(t, catOpencodeModel) {
			return catOpencodeModelUnavailable, true
		}
	case "minimax":
		if status == 429 && c.headerZero("x-ratelimit-remaining-model") {
			return catMinimaxModelQuota, true
		}
	case "openrouter":
		if status == 402 {
			return catOpenrouterCredits, true
		}
	case "cloudflare":
		if strings.Contains(t, "daily free allocation") {
			if c.nowMS < 0 || c.nowMS > maxGoNowMS {
				// Rego's floor differs from a floor between -1 and 0.
				return nil, false
			}
			next := (c.nowMS/msPerDay + 1) * msPerDay
			return newCatEntry("cloudflare.daily_neurons", "quota_exhausted", "connection", next-c.nowMS), true
		}
	case "agentrouter":
		if (status == 400 || status == 403 || status == 429) && strings.Contains(t, "额度不足") && !strings.Contains(t, "无权访问模型") {
			return catAgentrouterQuota, true
		}
		if strings.Contains(t, "无权访问模型") {
			return catAgentrouterNoModelAccess, true
		}
	}
	switch {
	case containsAny(t, catCreditsMarkers):
		return catCreditsBalanceText, true
	case slices.Contains(catBillingTypes, strings.ToLower(c.typ)) || slices.Contains(catBillingCodes, strings.ToLower(c.code)):
		return catCreditsBillingError, true
	case (status == 400 || status == 401 || status == 403) && containsAny(t, catRevokedMarkers):
		return catAuthKeyRevoked, true
	case (status == 400 || status == 413 || status == 422) && c.tooManyTools():
		return catToolsTooMany, true
	case status != 429:
		return nil, true
	case strings.Contains(t, "google.rpc.quotafailure"):
		// gemini.model_quota: left to Rego.
		return nil, false
	case strings.Contains(t, "rate limit reached for ") && strings.Contains(t, " in organization ") &&
		c.headerZero("x-ratelimit-remaining"):
		return catOpenaiModelRateLimit[c.textReason()], true
	case !c.hasHeader("anthropic-ratelimit-unified-status") && c.anthropicRemainingZero():
		return catAnthropicModelRateLimit, true
	case c.headerZero("x-ratelimit-remaining"):
		return catRemainingZero[c.textReason()], true
	}
	return nil, true
}

// The result documents' keys the Go version adds.
var (
	keyStatus    = ast.StringTerm("status")
	keyRestating = ast.StringTerm("restating")
)

// addBuiltin inserts the catalogue's decision for status into out as
// "builtin", when there is one; false when Rego must judge the attempt.
func (c *catInput) addBuiltin(out ast.Object, status int) bool {
	d, ok := c.goDecisionFor(status)
	if ok && d != nil {
		out.Insert(resultKeys.builtin, ast.NewTerm(d))
	}
	return ok
}

// goJudgedBuiltin is data.breakwater.pipeline.judged_builtin for input c
// with status (the status as sent): the built-in restatement, the status
// judged (its to_status when it differs from status) and the catalogue's
// decision for it. ok is false when Rego must judge the attempt.
func (c *catInput) goJudgedBuiltin(status int) (ast.Object, bool) {
	out := ast.NewObjectWithCapacity(3)
	judged := status
	if to, r := c.goRestate(status); r != nil {
		out.Insert(resultKeys.builtinRestate, ast.NewTerm(r))
		judged = to
	}
	if !c.addBuiltin(out, judged) {
		return nil, false
	}
	out.Insert(keyStatus, ast.InternedTerm(judged))
	return out, true
}

// goDecisions is data.breakwater.pipeline.decisions for a policy set
// without operator policies, for input c with status (the status as
// sent).
func (c *catInput) goDecisions(status int) (ast.Object, bool) {
	out := ast.NewObjectWithCapacity(2)
	if _, r := c.goRestate(status); r != nil {
		out.Insert(resultKeys.builtinRestate, ast.NewTerm(r))
		out.Insert(keyRestating, ast.InternedTerm(true))
		return out, true
	}
	if !c.addBuiltin(out, status) {
		return nil, false
	}
	return out, true
}

// goClassified is data.breakwater.pipeline.classified for a policy set
// without operator policies, for input c judged with status.
func (c *catInput) goClassified(status int) (ast.Object, bool) {
	out := ast.NewObjectWithCapacity(1)
	if !c.addBuiltin(out, status) {
		return nil, false
	}
	return out, true
}
