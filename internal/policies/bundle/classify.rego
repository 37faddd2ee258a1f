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

# credits.balance_text: the body says the account is out of credits or
# balance, whatever the status (docs/resilience.md §2, amendments):
# Anthropic's 400 invalid_request_error "Your credit balance is too low to
# access the Anthropic API", DeepSeek's 402 "Insufficient Balance", xAI's
# "has either used all available credits or reached its monthly spending
# limit", "Insufficient credits", Chinese "余额不足" (balance
# insufficient). Provider-agnostic: the phrases are unambiguous. Never the
# generic "quota" nor "额度不足" (a renewable quota, agentrouter.quota;
# §10 warns against phrases that collide): terminal credits_exhausted,
# fail over.
else := {"id": "credits.balance_text", "reason": "credits_exhausted", "scope": "connection", "cooldown_ms": 0} if {
	# credits_markers, inline: a literal array costs no virtual document
	# per evaluation (a test keeps the two equal).
	contains(input.text, [
		"credit balance is too low",
		"insufficient balance",
		"insufficient credits",
		"used all available credits",
		"余额不足",
	][_])
}

# credits.billing_error: a structured billing error, whatever the status:
# OpenAI's error type insufficient_quota (its 429 "You exceeded your
# current quota, please check your plan and billing details") or one of
# its billing codes (credit_balance_exhausted, the organization and
# project spend limits, the organization usage limit), Anthropic's
# billing_error. OpenAI documents that retrying these never restores
# access: terminal credits_exhausted. Read from the structured fields
# only, so a prose "exceeded your current quota" (Gemini's per-minute 429
# says it too) stays a quota.
else := {"id": "credits.billing_error", "reason": "credits_exhausted", "scope": "connection", "cooldown_ms": 0} if {
	lower(input.error.type) in {"insufficient_quota", "billing_error"}
} else := {"id": "credits.billing_error", "reason": "credits_exhausted", "scope": "connection", "cooldown_ms": 0} if {
	lower(input.error.code) in {
		"insufficient_quota",
		"credit_balance_exhausted",
		"organization_spend_limit_exceeded",
		"project_spend_limit_exceeded",
		"organization_usage_limit_exceeded",
	}
}

# auth.key_revoked: the body says the credential was revoked, deactivated
# or expired (OpenAI's invalid_api_key "has been revoked" or "has been
# deactivated", Anthropic's authentication_error "revoked", Google's 400
# "API key expired. Please renew the API key."): expired at once, on any
# profile. A plain 401 is not this (an apikey 401 backs off, an oauth 401
# heals through expired_retry_max retries).
else := {"id": "auth.key_revoked", "reason": "expired", "scope": "connection", "cooldown_ms": 0} if {
	status in {400, 401, 403}
	contains(input.text, revoked_markers[_])
}

# tools.too_many: the request declared more tools than the model accepts:
# OpenAI "Invalid 'tools': array too long. Expected an array with maximum
# length 128" (array_above_max_length), GitHub Copilot "You may not
# include more than 128 tools", Gemini "At most 512 function declarations
# can be specified", "too many tools". Only requests with that many tools
# fail: reason tool_limit, model scope, and the engine learns the limit
# (Engine.ToolLimit) instead of locking the model.
else := {"id": "tools.too_many", "reason": "tool_limit", "scope": "model", "cooldown_ms": 0} if {
	status in {400, 413, 422}
	too_many_tools
}

# gemini.model_quota: a Gemini 429 whose google.rpc.QuotaFailure names a
# per-model quota (a violation with quotaDimensions.model, or a quotaId
# "...PerModel...") is this model's quota, not the key's: model scope,
# the google.rpc.RetryInfo retryDelay as the cooldown (capped at 24 h;
# 0 when absent). The engine makes a wait beyond the connection's pacing
# bound a model lockout ("86399s": 23 h 59 m 59 s) and leaves a shorter
# one to pacing; the connection is not cooled and other models flow.
else := {"id": "gemini.model_quota", "reason": "quota_exhausted", "scope": "model", "cooldown_ms": google_retry_ms} if {
	status == 429
	contains(input.text, "google.rpc.quotafailure")
	google_model_quota
}

# openai.model_rate_limit: OpenAI meters rate limits per model and says so
# ("Rate limit reached for gpt-4o in organization org-… on tokens per min
# (TPM)"); with an x-ratelimit-remaining-* header at 0 the limit hit is
# this model's: model scope, the reason judged by the text, the wait from
# the x-ratelimit-reset-* headers (the engine's retry hint).
else := {"id": "openai.model_rate_limit", "reason": text_reason, "scope": "model", "cooldown_ms": 0} if {
	status == 429
	contains(input.text, "rate limit reached for ")
	contains(input.text, " in organization ")
	value := input.headers[name]
	startswith(name, "x-ratelimit-remaining")
	trim_space(value) == "0"
}

# anthropic.model_rate_limit: Anthropic's API rate limits are per model
# class; a 429 with an anthropic-ratelimit-{requests,tokens,input-tokens,
# output-tokens}-remaining header at 0 hit this model's limit: model
# scope, the wait from retry-after. Not the usage wall of a Claude
# subscription (anthropic-ratelimit-unified-*, docs/resilience.md §2b).
else := {"id": "anthropic.model_rate_limit", "reason": "rate_limit", "scope": "model", "cooldown_ms": 0} if {
	status == 429
	not input.headers["anthropic-ratelimit-unified-status"]
	value := input.headers[name]
	startswith(name, "anthropic-ratelimit-")
	endswith(name, "-remaining")
	not contains(name, "unified")
	trim_space(value) == "0"
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

# credits_markers say the account is out of credits or balance (the
# credits.balance_text entry lists them inline). They must not collide
# with the restatement markers of restate.rego (§10).
credits_markers := [
	"credit balance is too low",
	"insufficient balance",
	"insufficient credits",
	"used all available credits",
	"余额不足",
]

# revoked_markers say the credential itself was revoked or expired.
revoked_markers := [
	"has been revoked",
	"was revoked",
	"api key revoked",
	"key has been deactivated",
	"key was deactivated",
	"key is deactivated",
	"api key expired",
	"api key has expired",
]

# too_many_tools holds when the error text says the request has too many
# tools.
too_many_tools if {
	contains(input.text, "'tools'")
	contains(input.text, "array too long")
}

too_many_tools if contains(input.text, [
	"too many tools",
	"tools in your request",
	"function declarations can be specified",
	"maximum number of tools",
][_])

# "a maximum of 128 tools" (docs/resilience.md §14), also of functions or
# function declarations.
too_many_tools if regex.match(`maximum of [0-9]+ (tools|functions|function declarations)`, input.text)

# google_details are the google.rpc error details of a JSON body (Google's
# {"error": {"details": [...]}}, also inside a JSON array); none when the
# body is not JSON.
google_details contains d if {
	doc := json.unmarshal(input.body)
	walk(doc, [_, d])
	is_object(d)
	startswith(object.get(d, "@type", ""), "type.googleapis.com/google.rpc.")
}

# google_model_quota holds when a QuotaFailure violation names a model.
google_model_quota if {
	some d in google_details
	d["@type"] == "type.googleapis.com/google.rpc.QuotaFailure"
	some v in d.violations
	per_model_violation(v)
}

per_model_violation(v) if object.get(v, ["quotaDimensions", "model"], "") != ""

per_model_violation(v) if contains(lower(object.get(v, "quotaId", "")), "permodel")

# google_retry_ms is the longest RetryInfo retryDelay ("86399s", "1.5s")
# in milliseconds, capped at 24 h; 0 when there is none.
google_retry_ms := min([max(delays), 86400000]) if {
	delays := [round(to_number(trim_suffix(d.retryDelay, "s")) * 1000) |
		some d in google_details
		d["@type"] == "type.googleapis.com/google.rpc.RetryInfo"
		endswith(d.retryDelay, "s")
	]
	count(delays) > 0
} else := 0
