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
