package breakwater.classify_test

import data.breakwater.classify

# now_ms is 2025-06-01T12:00:00Z: 12 h before the next UTC midnight.
now_ms := 1748779200000

# req is an input as the gateway sends it, text included.
req(provider, status, body, headers) := {
	"provider": provider,
	"profile": "apikey",
	"status": status,
	"original_status": status,
	"headers": headers,
	"error": {"code": "", "type": ""},
	"body": body,
	"text": lower(concat(" ", [body, "", ""])),
	"now_ms": now_ms,
}

test_opencode_endpoint_unavailable if {
	classify.decision == {"id": "opencode.endpoint_unavailable", "reason": "transient", "scope": "model", "cooldown_ms": 300000} with input as req("opencode", 503, `{"type":"error","error":{"type":"api_error","message":"Upstream request failed: Endpoint is unavailable."}}`, {})
}

test_opencode_model_unavailable_400 if {
	classify.decision == {"id": "opencode.model_unavailable", "reason": "not_found", "scope": "model", "cooldown_ms": 3600000} with input as req("opencode", 400, `{"error":{"message":"Model is disabled: kimi-k2","type":"invalid_request_error"}}`, {})
}

test_opencode_model_text_needs_400 if {
	not classify.decision with input as req("opencode", 500, `{"error":{"message":"Model is disabled"}}`, {})
}

test_minimax_model_quota_header if {
	classify.decision == {"id": "minimax.model_quota", "reason": "quota_exhausted", "scope": "model", "cooldown_ms": 0} with input as req("minimax", 429, `{"base_resp":{"status_code":1002,"status_msg":"rate limit exceeded"}}`, {"x-ratelimit-remaining-model-requests": "0", "x-ratelimit-remaining-requests": "0"})
}

test_openrouter_402_cools_two_minutes if {
	classify.decision == {"id": "openrouter.credits_402", "reason": "credits_exhausted", "scope": "connection", "cooldown_ms": 120000} with input as req("openrouter", 402, `{"error":{"message":"Insufficient credits. Add more using https://openrouter.ai/settings/credits","code":402}}`, {})
}

test_other_provider_402_is_terminal_credits if {
	# The 2-minute window is OpenRouter's alone; the same text from another
	# provider is terminal credits_exhausted (credits.balance_text).
	classify.decision == {"id": "credits.balance_text", "reason": "credits_exhausted", "scope": "connection", "cooldown_ms": 0} with input as req("openai", 402, `{"error":{"message":"Insufficient credits"}}`, {})
}

test_cloudflare_daily_neurons_until_utc_midnight if {
	classify.decision == {"id": "cloudflare.daily_neurons", "reason": "quota_exhausted", "scope": "connection", "cooldown_ms": 43200000} with input as req("cloudflare", 429, `{"errors":[{"message":"AiError: you have used up your daily free allocation of 10,000 neurons, please upgrade to Cloudflare's Workers Paid plan if you would like to continue usage.","code":4006}],"success":false}`, {})
}

test_cloudflare_one_ms_before_midnight if {
	classify.decision.cooldown_ms == 1 with input as object.union(
		req("cloudflare", 429, "daily free allocation of 10,000 neurons", {}),
		{"now_ms": 1748822399999},
	)
}

test_agentrouter_quota_after_restatement if {
	classify.decision == {"id": "agentrouter.quota", "reason": "quota_exhausted", "scope": "connection", "cooldown_ms": 0} with input as object.union(
		req("agentrouter", 429, `{"error":{"message":"用户额度不足, 剩余额度: $0.000000","type":"new_api_error"}}`, {}),
		{"original_status": 403},
	)
}

test_agentrouter_no_model_access if {
	classify.decision == {"id": "agentrouter.no_model_access", "reason": "auth_error", "scope": "model", "cooldown_ms": 21600000} with input as req("agentrouter", 403, `{"error":{"message":"该令牌无权访问模型 claude-opus-4","type":"new_api_error"}}`, {})
}

test_agentrouter_no_model_access_vetoes_quota if {
	classify.decision.id == "agentrouter.no_model_access" with input as req("agentrouter", 403, `{"error":{"message":"该令牌无权访问模型 claude-opus-4 (额度不足)"}}`, {})
}

test_agentrouter_text_from_other_provider_not_matched if {
	not classify.decision with input as req("glm", 403, `{"error":{"message":"该令牌无权访问模型 glm-5"}}`, {})
}

test_ratelimit_remaining_zero_any_provider if {
	classify.decision == {"id": "ratelimit.remaining_zero", "reason": "rate_limit", "scope": "connection", "cooldown_ms": 0} with input as req("openai", 429, `{"error":{"message":"Rate limit reached for gpt-4o"}}`, {"x-ratelimit-remaining-requests": "0", "x-ratelimit-remaining-tokens": "1520"})
}

test_ratelimit_remaining_zero_reason_from_text if {
	classify.decision.reason == "quota_exhausted" with input as req("openai", 429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota"}}`, {"x-ratelimit-remaining-tokens": "0"})
	classify.decision.reason == "concurrency_limited" with input as req("glm", 429, `{"error":{"message":"并发数过高，请降低并发"}}`, {"x-ratelimit-remaining-requests": "0"})
}

test_ratelimit_remaining_above_zero_not_matched if {
	not classify.decision with input as req("openai", 429, "slow down", {"x-ratelimit-remaining-requests": "3"})
}

test_ratelimit_remaining_zero_needs_429 if {
	not classify.decision with input as req("openai", 400, "bad", {"x-ratelimit-remaining-requests": "0"})
}

test_first_entry_wins if {
	# minimax's model header is listed before the generic remaining rule.
	classify.decision.id == "minimax.model_quota" with input as req("minimax", 429, "", {"x-ratelimit-remaining-model-tokens": "0"})
}

test_text_reason if {
	classify.text_reason == "quota_exhausted" with input as req("x", 429, "Too many concurrent requests; monthly limit reached", {})
	classify.text_reason == "concurrency_limited" with input as req("x", 429, "Concurrency limit exceeded", {})
	classify.text_reason == "rate_limit" with input as req("x", 429, "slow down", {})
}

examples := [
	req("opencode", 503, "Upstream request failed: Endpoint is unavailable.", {}),
	req("opencode", 400, "Model is disabled", {}),
	req("minimax", 429, "", {"x-ratelimit-remaining-model-requests": "0"}),
	req("openrouter", 402, "Insufficient credits", {}),
	req("cloudflare", 429, "daily free allocation of 10,000 neurons", {}),
	req("agentrouter", 429, "用户额度不足", {}),
	req("agentrouter", 403, "该令牌无权访问模型 x", {}),
	req("openai", 429, "slow down", {"x-ratelimit-remaining-requests": "0"}),
	req("anthropic", 400, anthropic_credit_400, {}),
	reqe("openai", 429, openai_insufficient_quota, {}, "insufficient_quota", "insufficient_quota"),
	reqe("openai", 401, openai_revoked_401, {}, "invalid_api_key", "invalid_request_error"),
	reqe("openai", 400, openai_too_many_tools, {}, "array_above_max_length", "invalid_request_error"),
	req("gemini", 429, gemini_daily_429, {}),
	reqe("openai", 429, openai_model_rpd_429, openai_model_rpd_headers, "rate_limit_exceeded", "requests"),
	reqe("anthropic", 429, anthropic_429, anthropic_429_headers, "", "rate_limit_error"),
]

test_every_entry_decides_validly if {
	reasons := {"rate_limit", "quota_exhausted", "concurrency_limited", "auth_error", "credits_exhausted", "banned", "expired", "request_rejected", "not_found", "transient", "server_error", "bad_request", "tool_limit"}
	ids := {d.id |
		some x in examples
		d := classify.decision with input as x
		{k | some k, _ in d} == {"id", "reason", "scope", "cooldown_ms"}
		d.reason in reasons
		d.scope in {"model", "connection", "provider"}
		is_number(d.cooldown_ms)
		d.cooldown_ms >= 0
	}
	count(ids) == count(examples)
}

test_no_decision_without_a_match if {
	not classify.decision with input as req("openai", 500, "The server had an error", {})
	not classify.decision with input as req("openai", 429, "slow down", {"x-ratelimit-remaining-requests": "12"})
}

test_every_credits_marker_decides if {
	# credits.balance_text lists credits_markers inline: keep them equal.
	every m in classify.credits_markers {
		classify.decision.id == "credits.balance_text" with input as req("any", 400, concat(" ", ["error:", m]), {})
	}
}

test_markers_lower_case if {
	every m in array.concat(array.concat(classify.quota_markers, classify.concurrency_markers), array.concat(classify.credits_markers, classify.revoked_markers)) {
		m == lower(m)
	}
}

test_agentrouter_quota_statuses if {
	every status in [400, 403, 429] {
		classify.decision.id == "agentrouter.quota" with input as req("agentrouter", status, `{"error":{"message":"额度不足"}}`, {})
		classify.decision.id == "agentrouter.quota" with input as req("agentrouter", status, `{"error":{"message":"用户额度不足"}}`, {})
	}
	not classify.decision with input as req("agentrouter", 500, `{"error":{"message":"用户额度不足"}}`, {})
	not classify.decision with input as req("agentrouter", 429, `{"error":{"message":"额度"}}`, {})
}

test_entries_in_catalogue_order if {
	# Where two entries match, the earlier one decides: agentrouter.quota
	# before the generic ratelimit.remaining_zero, the opencode endpoint
	# before the opencode model.
	classify.decision.id == "agentrouter.quota" with input as req("agentrouter", 429, "用户额度不足", {"x-ratelimit-remaining-requests": "0"})
	classify.decision.id == "opencode.endpoint_unavailable" with input as req("opencode", 400, "Model is disabled: endpoint is unavailable", {})
	classify.decision.id == "ratelimit.remaining_zero" with input as req("cloudflare", 429, "slow down", {"x-ratelimit-remaining-requests": "0"})
}

test_decision_for_judges_its_argument if {
	# decision_for(s) is decision for the attempt restated to s: no entry
	# reads input.status or input.restated.
	every x in array.concat(examples, [
		req("agentrouter", 403, "用户额度不足", {"x-ratelimit-remaining-requests": "0"}),
		req("opencode", 503, "Model is disabled", {}),
	]) {
		every s in [400, 402, 403, 429, 500, 503] {
			restated := object.union(x, {"status": s, "restated": true})
			{d | d := classify.decision_for(s) with input as x} == {d | d := classify.decision with input as restated}
		}
	}
}

# reqe is req with the structured error code and type the gateway reads
# from the body (wire.ErrorFields).
reqe(provider, status, body, headers, code, typ) := object.union(req(provider, status, body, headers), {
	"error": {"code": code, "type": typ},
	"text": lower(concat(" ", [body, code, typ])),
})

# Fixtures, in the providers' documented shapes.

anthropic_credit_400 := `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`

openai_insufficient_quota := `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`

openai_spend_limit := `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"project_spend_limit_exceeded"}}`

deepseek_402 := `{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}`

xai_429 := `{"code":"Some resource has been exhausted","error":"Your team 16f2151a-40f4-4a80-8ad0-cae00c27e8dd has either used all available credits or reached its monthly spending limit. To continue making API requests, please purchase more credits or raise your spending limit."}`

openai_revoked_401 := `{"error":{"message":"The API key sk-proj-****abcd has been revoked.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`

openai_deactivated_401 := `{"error":{"message":"This API key has been deactivated.","type":"invalid_request_error","code":"invalid_api_key"}}`

anthropic_revoked_401 := `{"type":"error","error":{"type":"authentication_error","message":"This API key has been revoked."}}`

google_expired_400 := `{"error":{"code":400,"message":"API key expired. Please renew the API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]}}`

openai_plain_401 := `{"error":{"message":"Incorrect API key provided: sk-abc***. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`

openai_too_many_tools := `{"error":{"message":"Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 129 instead.","type":"invalid_request_error","param":"tools","code":"array_above_max_length"}}`

copilot_too_many_tools := `{"error":{"message":"You may not include more than 128 tools in your request.","code":"invalid_request_body"}}`

gemini_too_many_tools := `[{"error":{"code":400,"message":"The GenerateContentRequest proto is invalid:\n  * tools[0].function_declarations: [FIELD_INVALID] At most 512 function declarations can be specified.","status":"INVALID_ARGUMENT"}}]`

anthropic_tool_name_400 := `{"type":"error","error":{"type":"invalid_request_error","message":"tools.18.custom.name: String should have at most 128 characters"}}`

# gemini_daily_429 is Google's documented RESOURCE_EXHAUSTED shape: a
# google.rpc.QuotaFailure whose violation names the model in its
# quotaDimensions (a per-model daily quota), and a google.rpc.RetryInfo.
gemini_daily_429 := `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"86399s"}]}}`

# gemini_minute_429 is the per-minute variant in an OpenAI-compatible
# array wrapper: a short pacing hint.
gemini_minute_429 := `[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"22.5s"}]}}]`

# gemini_project_429 has a QuotaFailure that names no model: not this rule.
gemini_project_429 := `{"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/requests","quotaId":"RequestsPerDayPerProject"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3600s"}]}}`

openai_model_rpd_429 := `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc123 on requests per day (RPD): Limit 10000, Used 10000, Requested 1. Please try again in 8.64s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`

openai_model_rpd_headers := {"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "8.64s"}

anthropic_429 := `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits."}}`

anthropic_429_headers := {"retry-after": "20", "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": "2025-06-01T12:00:20Z", "anthropic-ratelimit-tokens-remaining": "71000"}

credits := {"reason": "credits_exhausted", "scope": "connection", "cooldown_ms": 0}

test_credits_by_text_whatever_the_status if {
	classify.decision == object.union(credits, {"id": "credits.balance_text"}) with input as reqe("anthropic", 400, anthropic_credit_400, {}, "", "invalid_request_error")
	classify.decision == object.union(credits, {"id": "credits.balance_text"}) with input as reqe("deepseek", 402, deepseek_402, {}, "invalid_request_error", "unknown_error")
	classify.decision == object.union(credits, {"id": "credits.balance_text"}) with input as req("xai", 429, xai_429, {})
	classify.decision == object.union(credits, {"id": "credits.balance_text"}) with input as req("relay", 403, `{"error":{"message":"用户余额不足"}}`, {})
}

test_credits_openai_billing_codes if {
	classify.decision == object.union(credits, {"id": "credits.billing_error"}) with input as reqe("openai", 429, openai_insufficient_quota, {}, "insufficient_quota", "insufficient_quota")
	classify.decision == object.union(credits, {"id": "credits.billing_error"}) with input as reqe("openai", 429, openai_spend_limit, {}, "project_spend_limit_exceeded", "insufficient_quota")
	classify.decision == object.union(credits, {"id": "credits.billing_error"}) with input as reqe("anthropic", 402, `{"type":"error","error":{"type":"billing_error","message":"Payment required."}}`, {}, "", "billing_error")
}

test_credits_do_not_collide_with_quota_text if {
	# The prose "exceeded your current quota" without the structured
	# billing type stays a quota (Gemini says it on a per-minute 429).
	not classify.decision with input as req("gemini", 429, `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED"}}`, {})
	# agentrouter's renewable 额度不足 stays quota_exhausted.
	classify.decision.id == "agentrouter.quota" with input as req("agentrouter", 429, `{"error":{"message":"用户额度不足, 剩余额度: $0.000000"}}`, {})
	# OpenRouter keeps its 2-minute window.
	classify.decision.id == "openrouter.credits_402" with input as req("openrouter", 402, `{"error":{"message":"Insufficient credits. Add more using https://openrouter.ai/settings/credits","code":402}}`, {})
	# No credits marker reuses a restatement marker.
	every r in data.breakwater.restate.rules {
		every m in array.concat(r.text_markers, r.exclude_markers) {
			every c in classify.credits_markers {
				not contains(m, c)
				not contains(c, m)
			}
		}
	}
}

expired := {"id": "auth.key_revoked", "reason": "expired", "scope": "connection", "cooldown_ms": 0}

test_revoked_or_expired_key if {
	classify.decision == expired with input as reqe("openai", 401, openai_revoked_401, {}, "invalid_api_key", "invalid_request_error")
	classify.decision == expired with input as reqe("openai", 401, openai_deactivated_401, {}, "invalid_api_key", "invalid_request_error")
	classify.decision == expired with input as reqe("anthropic", 401, anthropic_revoked_401, {}, "", "authentication_error")
	classify.decision == expired with input as reqe("gemini", 400, google_expired_400, {}, "400", "")
}

test_plain_401_is_not_expired if {
	not classify.decision with input as reqe("openai", 401, openai_plain_401, {}, "invalid_api_key", "invalid_request_error")
	not classify.decision with input as reqe("anthropic", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, {}, "", "authentication_error")
	# An oauth token that lapsed heals through retries: not this rule.
	not classify.decision with input as req("claude", 401, `{"type":"error","error":{"type":"authentication_error","message":"OAuth token has expired. Please obtain a new token or refresh your existing token."}}`, {})
}

tool_limit := {"id": "tools.too_many", "reason": "tool_limit", "scope": "model", "cooldown_ms": 0}

test_too_many_tools if {
	classify.decision == tool_limit with input as reqe("openai", 400, openai_too_many_tools, {}, "array_above_max_length", "invalid_request_error")
	classify.decision == tool_limit with input as reqe("copilot", 400, copilot_too_many_tools, {}, "invalid_request_body", "")
	classify.decision == tool_limit with input as req("gemini", 400, gemini_too_many_tools, {})
	classify.decision == tool_limit with input as req("anthropic", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"too many tools: 300"}}`, {})
	classify.decision == tool_limit with input as req("vllm", 400, `{"error":{"message":"This model supports a maximum of 8 tools.","type":"BadRequestError"}}`, {})
}

test_tool_name_length_is_not_a_tool_limit if {
	not classify.decision with input as req("anthropic", 400, anthropic_tool_name_400, {})
}

test_gemini_daily_model_quota_is_model_scoped if {
	classify.decision == {"id": "gemini.model_quota", "reason": "quota_exhausted", "scope": "model", "cooldown_ms": 86399000} with input as req("gemini", 429, gemini_daily_429, {})
}

test_gemini_minute_quota_keeps_its_short_hint if {
	# quotaId "...PerModel..." names a per-model quota; the 22.5 s delay
	# is the cooldown the engine leaves to pacing.
	classify.decision == {"id": "gemini.model_quota", "reason": "quota_exhausted", "scope": "model", "cooldown_ms": 22500} with input as req("gemini", 429, gemini_minute_429, {})
}

test_gemini_retry_delay_capped_at_a_day if {
	body := replace(gemini_daily_429, `"86399s"`, `"200000s"`)
	classify.decision.cooldown_ms == 86400000 with input as req("gemini", 429, body, {})
}

test_gemini_project_quota_is_not_model_scoped if {
	not classify.decision with input as req("gemini", 429, gemini_project_429, {})
	# Not JSON (cut by the body bound): no decision, no error.
	not classify.decision with input as req("gemini", 429, substring(gemini_daily_429, 0, 300), {})
}

test_openai_model_rate_limit if {
	classify.decision == {"id": "openai.model_rate_limit", "reason": "rate_limit", "scope": "model", "cooldown_ms": 0} with input as reqe("openai", 429, openai_model_rpd_429, openai_model_rpd_headers, "rate_limit_exceeded", "requests")
	# Without a remaining header at 0 the evidence is missing.
	not classify.decision with input as reqe("openai", 429, openai_model_rpd_429, {"retry-after": "7"}, "rate_limit_exceeded", "requests")
	# A key-wide limit text keeps the connection scope.
	classify.decision.id == "ratelimit.remaining_zero" with input as req("openai", 429, "slow down", {"x-ratelimit-remaining-requests": "0"})
}

test_anthropic_model_rate_limit if {
	classify.decision == {"id": "anthropic.model_rate_limit", "reason": "rate_limit", "scope": "model", "cooldown_ms": 0} with input as reqe("anthropic", 429, anthropic_429, anthropic_429_headers, "", "rate_limit_error")
	# The usage wall of a subscription is not a model limit.
	not classify.decision with input as reqe("claude", 429, anthropic_429, object.union(anthropic_429_headers, {"anthropic-ratelimit-unified-status": "rejected"}), "", "rate_limit_error")
	# No remaining header at 0: not this rule.
	not classify.decision with input as reqe("anthropic", 429, anthropic_429, {"retry-after": "20", "anthropic-ratelimit-requests-remaining": "3"}, "", "rate_limit_error")
}
