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

test_other_provider_402_not_matched if {
	not classify.decision with input as req("openai", 402, `{"error":{"message":"Insufficient credits"}}`, {})
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
]

test_every_entry_decides_validly if {
	reasons := {"rate_limit", "quota_exhausted", "concurrency_limited", "auth_error", "credits_exhausted", "banned", "expired", "request_rejected", "not_found", "transient", "server_error", "bad_request"}
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

test_markers_lower_case if {
	every m in array.concat(classify.quota_markers, classify.concurrency_markers) {
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
