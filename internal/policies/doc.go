// Package policies is the failure-path policy pipeline of docs/resilience.md
// §10 (status restatement) and §11 (provider error classification): it
// turns one failed upstream attempt into an engine.Outcome, with rules that
// are data rather than code. The success path never reaches it.
//
// # Sources, in precedence order
//
//  1. Operator rules: OperatorRule values declared at runtime
//     (SetOperatorRules), persisted in the engine.Store.
//  2. Plugins: the restate and classify hooks of WASM plugins (PluginHook).
//  3. Operator policies: .rego files in Options.Dir, hot-reloaded, or the
//     .rego files of an OPA bundle polled from a bundle server
//     (Options.Bundle, BundleOptions; then Dir is not read).
//  4. The built-in bundle, embedded from bundle/ (lib, restate, classify
//     and pipeline, each beside its _test.rego, and a .manifest with the
//     revision).
//  5. engine.DefaultClassifier, when no rule matched.
//
// Restatement runs first (operator rules, operator and built-in Rego, then
// a plugin only when nothing restated); classification then sees the
// restated status (operator rules, plugin, operator Rego, built-in Rego,
// default). See Pipeline.
//
// # Input document
//
// Rego policies see one failed attempt as input:
//
//	{
//	  "provider": "agentrouter", "connection": "key-1", "model": "claude-sonnet-4",
//	  "profile": "apikey",
//	  "status": 429,            // after restatement
//	  "original_status": 403,   // what the upstream sent
//	  "restated": true,         // status differs from original_status
//	  "headers": {"retry-after-ms": "5000"},   // names lower-cased
//	  "error": {"code": "", "type": "new_api_error"},   // "" when absent
//	  "body": "...",            // bounded to 64 KiB (MaxBodyBytes)
//	  "text": "...",            // lower(body + " " + code + " " + type)
//	  "now_ms": 1748779200000   // when the answer arrived, Unix ms
//	}
//
// Restatement rules see the status as sent (restated false); the
// classification rules see the restated status. Match markers against
// text (or data.breakwater.lib.text, which also works for hand-written test
// inputs without it): the gateway lower-cases once.
//
// # Operator policies
//
// Operator .rego files are Rego v1 and must declare package
// breakwater.operator (helpers may live below it, tests in
// breakwater.operator_test). They may import data.breakwater.lib and read
// the built-in catalogues (data.breakwater.classify.quota_markers, ...).
// http.send, net.lookup_ip_addr and opa.runtime are not available. Two
// complete rules are read, both optional:
//
//	# restate: correct the upstream status before classification.
//	restate := {"id": "acme.busy_503", "to_status": 429, "retry_after_ms": 30000} if {
//		input.provider == "acme"
//		input.status == 503
//		contains(lower(input.body), "capacity")
//	}
//
//	# classify: reason, scope ("model", "connection" or "provider") and
//	# an optional cooldown_ms; judged with the restated status.
//	classify := {"id": "acme.capacity", "reason": "rate_limit", "scope": "connection", "cooldown_ms": 60000} if {
//		input.provider == "acme"
//		input.status == 429
//	}
//
// Reasons are the engine's names: rate_limit, quota_exhausted,
// concurrency_limited, auth_error, credits_exhausted, banned, expired,
// request_rejected, not_found, transient, server_error, bad_request,
// tool_limit. A provider scope declares the failure provider-wide: it
// trips the breaker whatever its status (a 429 as a rate_limit storm). A
// decision with an unknown reason or scope, or a restatement whose
// to_status is not an HTTP status different from the current one, is
// ignored. A file set that fails to parse, compile, or pass its own
// _test.rego tests is rejected as a whole and the previous revision keeps
// serving (Reload, Status). An evaluation that fails at run time (two
// restate values, say) falls back to the built-in policies for that attempt.
// Every evaluation has a deadline (Options.EvalTimeout, config
// policies.eval_timeout_ms, default 50 ms; the built-in policies alone get
// at least 1 s, so a stalled scheduler does not cut the gateway's own
// rules) and ends with the caller's request (ClassifyContext): a policy
// that would compute for seconds is cancelled, the attempt is judged by the
// built-in policies, and the timeout is counted (Status.EvalTimeouts) and
// logged once per revision.
//
// # Cost
//
// The pipeline runs on every failed attempt. While the built-in policies
// serve alone (no operator .rego file, no bundle policy), the catalogue is
// evaluated by its Go version (catalogue.go), which returns the documents
// the Rego queries return and is checked against them by the differential
// tests (TestGoCatalogueMatchesRego and the tests beside it); with
// operator policies, OPA evaluates everything as follows. The built-in
// policies are written for OPA's rule index: the classification catalogue is one else
// chain (data.breakwater.classify.decision_for), each entry testing
// input.provider or the status against constants first, so that the index
// skips the entries that cannot apply and evaluation stops at the first
// match; entries evaluate a few built-ins each. One Rego evaluation serves
// an attempt, a restated one included: data.breakwater.pipeline.judged
// classifies the status a Rego restatement yields with `with input.status
// as ...`, and judged_builtin (no operator policies) passes it to
// decision_for instead, sparing the copy of the input a `with` makes. A
// second evaluation runs only after an operator JSON rule or the plugin
// restated the status. Each evaluation borrows a pooled cache for the
// documents it computes, hands OPA its own cancellation handle, cancelled
// by a timer (the deadline) and by context.AfterFunc (the caller's
// context) — OPA otherwise starts a goroutine per evaluation to watch the
// context — and no metrics, and its result is read as OPA's terms, not
// converted to Go maps.
// BenchmarkRestateAndClassify measures one attempt.
//
// # Decision logs
//
// With Options.DecisionLog, Classify records every decision (Decision:
// the attempt, the restatement and classification rules, the revision,
// the duration; no body, credential-like headers masked) in a ring buffer
// (Decisions) and, through bounded queues that never block, in a rotated
// JSON-lines file and an OPA decision log service (DecisionLogOptions).
// Explain records nothing. Watch runs the file and service writers and the
// bundle poller besides the directory watcher. docs/policies.md is the
// operator's guide to all of this.
package policies
