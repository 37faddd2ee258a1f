package breakwater.restate_test

import data.breakwater.restate

agentrouter(status, body) := {
	"provider": "agentrouter",
	"status": status,
	"headers": {},
	"error": {"code": "", "type": "new_api_error"},
	"body": body,
	"text": lower(concat(" ", [body, "", "new_api_error"])),
}

quota_body := `{"error":{"message":"用户额度不足, 剩余额度: $0.000000","type":"new_api_error"}}`

test_403_quota_restated_to_429_with_60s if {
	restate.decision == {"id": "agentrouter.quota_429", "to_status": 429, "retry_after_ms": 60000} with input as agentrouter(403, quota_body)
}

test_400_quota_restated if {
	restate.decision.to_status == 429 with input as agentrouter(400, `{"error":{"message":"额度不足","type":"new_api_error"}}`)
}

test_no_model_access_excluded if {
	not restate.decision with input as agentrouter(403, `{"error":{"message":"该令牌无权访问模型 claude-opus-4 (额度不足)","type":"new_api_error"}}`)
	not restate.decision with input as agentrouter(403, `{"error":{"message":"该令牌无权访问模型 claude-opus-4","type":"new_api_error"}}`)
}

test_other_provider_not_restated if {
	not restate.decision with input as object.union(agentrouter(403, quota_body), {"provider": "openai"})
}

test_incoming_429_untouched if {
	not restate.decision with input as agentrouter(429, quota_body)
}

test_other_403_untouched if {
	not restate.decision with input as agentrouter(403, `{"error":{"message":"invalid token","type":"new_api_error"}}`)
}

test_rules_shape_and_lower_case_markers if {
	every r in restate.rules {
		is_string(r.id)
		is_string(r.provider)
		count(r.from_statuses) > 0
		is_number(r.to_status)
		is_number(r.default_retry_after_ms)
		every m in array.concat(r.text_markers, r.exclude_markers) {
			m == lower(m)
		}
	}
}

rule(id, provider, to, text, exclude) := {
	"id": id,
	"provider": provider,
	"from_statuses": [403],
	"to_status": to,
	"text_markers": text,
	"exclude_markers": exclude,
	"default_retry_after_ms": 1000,
}

test_first_matching_rule_in_catalogue_order if {
	rules := [
		rule("other_provider", "openai", 503, ["额度不足"], []),
		rule("no_marker", "agentrouter", 500, ["nope"], []),
		rule("first", "agentrouter", 429, ["nope", "额度不足", "用户额度不足"], []),
		rule("second", "agentrouter", 503, ["额度不足"], []),
	]
	restate.decision == {"id": "first", "to_status": 429, "retry_after_ms": 1000} with input as agentrouter(403, quota_body)
		with restate.rules as rules
}

test_exclude_marker_vetoes_its_rule_only if {
	rules := [
		rule("vetoed", "agentrouter", 429, ["额度不足"], ["nope", "剩余额度"]),
		rule("next", "agentrouter", 503, ["额度不足"], ["nope"]),
	]
	restate.decision.id == "next" with input as agentrouter(403, quota_body) with restate.rules as rules
	not restate.decision with input as agentrouter(400, quota_body) with restate.rules as rules
}
