package breakwater.pipeline_test

import data.breakwater.pipeline

quota_403 := {
	"provider": "agentrouter",
	"status": 403,
	"original_status": 403,
	"restated": false,
	"headers": {},
	"error": {"code": "", "type": "new_api_error"},
	"body": `{"error":{"message":"用户额度不足","type":"new_api_error"}}`,
	"text": `{"error":{"message":"用户额度不足","type":"new_api_error"}}  new_api_error`,
	"now_ms": 0,
}

test_decisions_for_the_status_as_sent if {
	d := pipeline.decisions with input as quota_403
	d == {
		"builtin_restate": {"id": "agentrouter.quota_429", "to_status": 429, "retry_after_ms": 60000},
		"restating": true,
	}
}

test_classifications_without_restatement if {
	d := pipeline.decisions with input as object.union(quota_403, {"body": "该令牌无权访问模型 x", "text": "该令牌无权访问模型 x"})
	d == {"builtin": {"id": "agentrouter.no_model_access", "reason": "auth_error", "scope": "model", "cooldown_ms": 21600000}}
}

test_classified_after_restatement if {
	d := pipeline.classified with input as object.union(quota_403, {"status": 429, "restated": true})
	d == {"builtin": {"id": "agentrouter.quota", "reason": "quota_exhausted", "scope": "connection", "cooldown_ms": 0}}
}

test_operator_decisions_reported if {
	d := pipeline.decisions with input as quota_403
		with data.breakwater.operator.restate as {"id": "op", "to_status": 503}
		with data.breakwater.operator.classify as {"id": "op", "reason": "rate_limit", "scope": "connection"}
	d.operator_restate == {"id": "op", "to_status": 503}
	d.builtin_restate.id == "agentrouter.quota_429"
	d.restating
	not d.operator
	c := pipeline.classified with input as quota_403
		with data.breakwater.operator.classify as {"id": "op", "reason": "rate_limit", "scope": "connection"}
	c.operator.id == "op"
}

test_nothing_for_unknown_error if {
	d := pipeline.decisions with input as object.union(quota_403, {"provider": "openai", "body": "boom", "text": "boom  ", "status": 500})
	d == {}
}
