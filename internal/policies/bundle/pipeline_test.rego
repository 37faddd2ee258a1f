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

test_judged_classifies_the_restated_status if {
	want := {
		"builtin_restate": {"id": "agentrouter.quota_429", "to_status": 429, "retry_after_ms": 60000},
		"status": 429,
		"builtin": {"id": "agentrouter.quota", "reason": "quota_exhausted", "scope": "connection", "cooldown_ms": 0},
	}
	pipeline.judged == want with input as quota_403
	pipeline.judged_builtin == want with input as quota_403
}

test_judged_without_restatement if {
	no_access := object.union(quota_403, {"body": "该令牌无权访问模型 x", "text": "该令牌无权访问模型 x"})
	want := {"status": 403, "builtin": {"id": "agentrouter.no_model_access", "reason": "auth_error", "scope": "model", "cooldown_ms": 21600000}}
	pipeline.judged == want with input as no_access
	pipeline.judged_builtin == want with input as no_access
	unknown := object.union(quota_403, {"provider": "openai", "body": "boom", "text": "boom  ", "status": 500})
	pipeline.judged == {"status": 500} with input as unknown
	pipeline.judged_builtin == {"status": 500} with input as unknown
}

test_judged_restated_without_classification if {
	boom := object.union(quota_403, {"provider": "openai", "body": "boom", "text": "boom  "})
	d := pipeline.judged_builtin with input as boom
		with data.breakwater.restate.decision as {"id": "x", "to_status": 503}
	d == {"builtin_restate": {"id": "x", "to_status": 503}, "status": 503}
}

test_judged_operator_restatement_first if {
	d := pipeline.judged with input as quota_403
		with data.breakwater.operator.restate as {"id": "op", "to_status": 503}
		with data.breakwater.operator.classify as {"id": "op", "reason": "transient", "scope": "provider"}
	d.status == 503
	d.operator_restate == {"id": "op", "to_status": 503}
	d.builtin_restate.id == "agentrouter.quota_429"
	d.operator.id == "op"
	not d.builtin # no built-in entry for agentrouter's 503 with this text
}

test_judged_classification_sees_restated_status if {
	# ratelimit.remaining_zero applies to a 429 only.
	limited := object.union(quota_403, {"provider": "openai", "body": "slow down", "text": "slow down  ", "headers": {"x-ratelimit-remaining-requests": "0"}})
	not pipeline.judged.builtin with input as limited
	d := pipeline.judged with input as limited
		with data.breakwater.operator.restate as {"id": "op", "to_status": 429}
	d.status == 429
	d.builtin.id == "ratelimit.remaining_zero"
}

test_judged_invalid_operator_restatement_falls_through if {
	every bad in [
		{"id": "op", "to_status": 403},
		{"id": "op", "to_status": 99},
		{"id": "op", "to_status": 600},
		{"id": "op", "to_status": 503.5},
		{"id": "op", "to_status": "503"},
		{"id": "op", "to_status": 503, "retry_after_ms": -1},
		{"id": "op", "to_status": 503, "retry_after_ms": 1.5},
		{"id": "op", "to_status": 503, "retry_after_ms": null},
		{"id": "op"},
	] {
		d := pipeline.judged with input as quota_403 with data.breakwater.operator.restate as bad
		d.status == 429
		d.operator_restate == bad
		d.builtin.id == "agentrouter.quota"
	}
}

test_valid_restate if {
	pipeline.valid_restate({"to_status": 429}) with input as quota_403
	pipeline.valid_restate({"to_status": 503, "retry_after_ms": 0}) with input as quota_403
	pipeline.valid_restate({"to_status": 503, "retry_after_ms": 60000}) with input as quota_403
	not pipeline.valid_restate({"to_status": 403}) with input as quota_403
	not pipeline.valid_restate({"to_status": 503, "retry_after_ms": "1"}) with input as quota_403
}
