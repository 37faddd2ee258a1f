package breakwater.operator_test

import data.breakwater.operator

relay_quota_body := `{"error":{"message":"Daily quota exceeded for this key (2000 requests per day)","type":"quota_error"}}`

# 2026-03-01T18:00:00Z: six hours before the reset.
relay_six_pm := 1772388000000

test_relay_quota_403_restated_to_429 if {
	r := operator.restate with input as {"provider": "relay", "status": 403, "body": relay_quota_body}
	r.id == "relay.quota_403"
	r.to_status == 429
	r.retry_after_ms == 3600000
}

test_relay_quota_cooled_until_midnight if {
	d := operator.classify with input as {
		"provider": "relay", "status": 429, "original_status": 403, "restated": true,
		"body": relay_quota_body, "now_ms": relay_six_pm,
	}
	d.reason == "quota_exhausted"
	d.scope == "connection"
	d.cooldown_ms == 6 * 3600000
}

test_relay_forbidden_model_keeps_403 if {
	not operator.restate with input as {"provider": "relay", "status": 403, "body": `{"error":{"message":"This key may not use gpt-4o"}}`}
}

test_other_provider_not_restated if {
	not operator.restate with input as {"provider": "openai", "status": 403, "body": relay_quota_body}
}
