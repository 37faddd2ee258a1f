# Package breakwater.classify is the built-in provider error classification
# catalogue (RESILIENCE.md §11). It runs after restatement (input.status is
# the restated status, input.original_status the upstream one) and sees
# every status, 400 included. When no entry matches, the gateway's Go
# default classification applies.
#
# Each catalogue entry is one rule of the partial object hits, keyed by its
# priority; decision is the entry with the lowest key, as
# {id, reason, scope, cooldown_ms}:
#
#   id           stable rule id, reported as Outcome.RuleID
#   reason       engine reason name
#   scope        "model", "connection" or "provider"
#   cooldown_ms  the lock duration, 0 for the mechanism's own backoff
#
# Provider-specific entries come first (keys 10..79), generic ones last
# (80..). Every entry tests input.provider or input.status against a
# constant first, so that OPA's rule index evaluates only the entries that
# can apply: this catalogue runs on every failed attempt. Markers are
# lower-case and matched against input.text (the lower-cased body, error
# code and type; see data.breakwater.lib.text).
package breakwater.classify

# opencode.endpoint_unavailable: OpenCode Zen relays its upstream's routing
# failure as "Upstream request failed: Endpoint is unavailable." (any
# status): this model's endpoint is down, other models still work. Model
# scope for 300 s.
hits[10] := {"id": "opencode.endpoint_unavailable", "reason": "transient", "scope": "model", "cooldown_ms": 300000} if {
	input.provider == "opencode"
	contains(input.text, ["endpoint is unavailable", "no endpoints available"][_])
}

# opencode.model_unavailable: OpenCode answers 400 for a model that is
# disabled for the account or no longer served ("Model is disabled",
# "model not supported", ...); retrying it within the hour is futile. Model
# scope for 1 h.
hits[20] := {"id": "opencode.model_unavailable", "reason": "not_found", "scope": "model", "cooldown_ms": 3600000} if {
	input.provider == "opencode"
	input.status == 400
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
hits[30] := {"id": "minimax.model_quota", "reason": "quota_exhausted", "scope": "model", "cooldown_ms": 0} if {
	input.provider == "minimax"
	input.status == 429
	value := input.headers[name]
	startswith(name, "x-ratelimit-remaining-model")
	trim_space(value) == "0"
}

# openrouter.credits_402: OpenRouter's 402 ("Insufficient credits", or a
# key's credit limit) heals when credits are topped up or the limit window
# renews: a 2-minute connection cooldown, never the terminal
# credits_exhausted state.
hits[40] := {"id": "openrouter.credits_402", "reason": "credits_exhausted", "scope": "connection", "cooldown_ms": 120000} if {
	input.provider == "openrouter"
	input.status == 402
}

# cloudflare.daily_neurons: Workers AI free plan, "you have used up your
# daily free allocation of 10,000 neurons" (error code 4006, any status).
# The allocation resets at 00:00 UTC: connection scope until then.
hits[50] := {"id": "cloudflare.daily_neurons", "reason": "quota_exhausted", "scope": "connection", "cooldown_ms": ms_until_utc_midnight} if {
	input.provider == "cloudflare"
	contains(input.text, "daily free allocation")
}

# agentrouter.quota: "用户额度不足" / "额度不足" (quota insufficient) on a
# 400, 403 or 429 (a 403/400 arrives here restated to 429): a renewable
# quota of this account. Connection scope, never terminal. "无权访问模型"
# vetoes it (see the next entry).
hits[60] := {"id": "agentrouter.quota", "reason": "quota_exhausted", "scope": "connection", "cooldown_ms": 0} if {
	input.provider == "agentrouter"
	{400, 403, 429}[input.status]
	contains(input.text, ["用户额度不足", "额度不足"][_])
	not contains(input.text, "无权访问模型")
}

# agentrouter.no_model_access: "该令牌无权访问模型 <model>" (this key may
# not use this model), any status. Model scope for 6 h (the engine clamps
# it to the model lockout ceiling).
hits[70] := {"id": "agentrouter.no_model_access", "reason": "auth_error", "scope": "model", "cooldown_ms": 21600000} if {
	input.provider == "agentrouter"
	contains(input.text, "无权访问模型")
}

# ratelimit.remaining_zero: any provider's 429 with an
# x-ratelimit-remaining-* header at 0 exhausted a limit of the key, not of
# the model: connection scope, the reason judged by the text as the
# engine's default does (text_reason).
hits[80] := {"id": "ratelimit.remaining_zero", "reason": text_reason, "scope": "connection", "cooldown_ms": 0} if {
	input.status == 429
	value := input.headers[name]
	startswith(name, "x-ratelimit-remaining")
	trim_space(value) == "0"
}

# decision is the matching entry with the lowest key.
decision := hits[min(object.keys(hits))]

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
