# Package breakwater.classify is the built-in provider error classification
# catalogue (docs/resilience.md §11). It runs after restatement (input.status is
# the restated status, input.original_status the upstream one) and sees
# every status, 400 included. When no entry matches, the gateway's Go
# default classification applies.
#
# decision is the first matching catalogue entry, as
# {id, reason, scope, cooldown_ms}:
#
#   id           stable rule id, reported as Outcome.RuleID
#   reason       engine reason name
#   scope        "model", "connection" or "provider"
#   cooldown_ms  the lock duration, 0 for the mechanism's own backoff
#
# The entries are the branches of one else chain, the function
# decision_for(status), in priority order: provider-specific entries first,
# generic ones last. Evaluation stops at the first branch that matches, and
# every entry tests input.provider or the status against constants first,
# so that OPA's rule index (which indexes each branch) skips the entries
# that cannot apply: this catalogue runs on every failed attempt. The
# entries read the status to judge from their argument, never from
# input.status or input.restated: data.breakwater.pipeline.judged_builtin
# so judges a restated status without a `with` (which copies the whole
# input). Markers are lower-case and matched against input.text (the
# lower-cased body, error code and type; see data.breakwater.lib.text).
package breakwater.classify

# decision is the catalogue's decision for the attempt.
decision := decision_for(input.status)

# decision_for(status) is the first catalogue entry that matches the
# attempt judged with status (see above). The entries follow.
#
# opencode.endpoint_unavailable: OpenCode Zen relays its upstream's routing
# failure as "Upstream request failed: Endpoint is unavailable." (any
# status): this model's endpoint is down, other models still work. Model
# scope for 300 s.
decision_for(status) := {"id": "opencode.endpoint_unavailable", "reason": "transient", "scope": "model", "cooldown_ms": 300000} if {
	input.provider == "opencode"
	contains(input.text, ["endpoint is unavailable", "no endpoints available"][_])
}

# opencode.model_unavailable: OpenCode answers 400 for a model that is
# disabled for the account or no longer served ("Model is disabled",
# "model not supported", ...); retrying it within the hour is futile. Model
# scope for 1 h.
else := {"id": "opencode.model_unavailable", "reason": "not_found", "scope": "model", "cooldown_ms": 3600000} if {
	input.provider == "opencode"
	status == 400
	contains(input.text, [
		"model is disabled",
		"model is not available",
		"model not available",
		"model is not supported",
		"model not supported",
	][_])
}

# minimax.model_quota: MiniMax meters some quotas per model and reports
# them in model-level rate-limit headers (x-ratelimit-remaining-model-*);
# one at 0 on a 429 means this model's quota, not the key's. Model scope,
# the engine's own backoff.
else := {"id": "minimax.model_quota", "reason": "quota_exhausted", "scope": "model", "cooldown_ms": 0} if {
	input.provider == "minimax"
	status == 429
	value := input.headers[name]
	startswith(name, "x-ratelimit-remaining-model")
	trim_space(value) == "0"
}

# openrouter.credits_402: OpenRouter's 402 ("Insufficient credits", or a
# key's credit limit) heals when credits are topped up or the limit window
# renews: a 2-minute connection cooldown, never the terminal
# credits_exhausted state.
else := {"id": "openrouter.credits_402", "reason": "credits_exhausted", "scope": "connection", "cooldown_ms": 120000} if {
	input.provider == "openrouter"
	status == 402
}

# cloudflare.daily_neurons: Workers AI free plan, "you have used up your
# daily free allocation of 10,000 neurons" (error code 4006, any status).
# The allocation resets at 00:00 UTC: connection scope until then.
else := {"id": "cloudflare.daily_neurons", "reason": "quota_exhausted", "scope": "connection", "cooldown_ms": ms_until_utc_midnight} if {
	input.provider == "cloudflare"
	contains(input.text, "daily free allocation")
}

# agentrouter.quota: "用户额度不足" / "额度不足" (quota insufficient) on a
# 400, 403 or 429 (a 403/400 arrives here restated to 429): a renewable
# quota of this account. Connection scope, never terminal. "无权访问模型"
# vetoes it (see the next entry). One marker covers both texts: "额度不足"
# is part of "用户额度不足".
else := {"id": "agentrouter.quota", "reason": "quota_exhausted", "scope": "connection", "cooldown_ms": 0} if {
	input.provider == "agentrouter"
	status in {400, 403, 429}
	contains(input.text, "额度不足")
	not contains(input.text, "无权访问模型")
}

# agentrouter.no_model_access: "该令牌无权访问模型 <model>" (this key may
# not use this model), any status. Model scope for 6 h (the engine clamps
# it to the model lockout ceiling).
else := {"id": "agentrouter.no_model_access", "reason": "auth_error", "scope": "model", "cooldown_ms": 21600000} if {
	input.provider == "agentrouter"
	contains(input.text, "无权访问模型")
}

# ratelimit.remaining_zero: any provider's 429 with an
# x-ratelimit-remaining-* header at 0 exhausted a limit of the key, not of
# the model: connection scope, the reason judged by the text as the
# engine's default does (text_reason).
else := {"id": "ratelimit.remaining_zero", "reason": text_reason, "scope": "connection", "cooldown_ms": 0} if {
	status == 429
	value := input.headers[name]
	startswith(name, "x-ratelimit-remaining")
	trim_space(value) == "0"
}

# quota_markers say a quota is exhausted. They mirror the engine's
# IsQuotaText (engine/classify.go); a Go test keeps them in step.
quota_markers := [
	"quota", # quota, insufficient_quota, exceeded your current quota
	"usage limit",
	"usage_limit",
	"daily limit",
	"weekly limit",
	"monthly limit",
	"额度不足",
]

# concurrency_markers say the account is busy rather than out of quota.
# They mirror the engine's IsConcurrencyLimitedText.
concurrency_markers := [
	"too many concurrent requests",
	"concurrency limit",
	"concurrency_limit",
	"concurrent request limit",
	"parallel request limit",
	"并发数过高",
]

# quota_text holds when the error text says a quota is exhausted.
quota_text if contains(input.text, quota_markers[_])

# concurrency_text holds when the error text says the account is busy.
concurrency_text if contains(input.text, concurrency_markers[_])

# text_reason is the reason of a 429 judged by its text: quota wins over
# concurrency, anything else is a rate limit.
text_reason := "quota_exhausted" if quota_text
else := "concurrency_limited" if concurrency_text
else := "rate_limit"

# ms_until_utc_midnight is the time from input.now_ms to the next 00:00 UTC.
ms_until_utc_midnight := ((floor(input.now_ms / 86400000) + 1) * 86400000) - input.now_ms
