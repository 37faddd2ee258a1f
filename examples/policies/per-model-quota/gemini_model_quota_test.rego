package breakwater.operator_test

import data.breakwater.operator

gemini_quota_body(retry) := json.marshal({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
	{
		"@type": "type.googleapis.com/google.rpc.QuotaFailure",
		"violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel", "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"}}],
	},
	{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry},
]}})

test_gemini_model_quota_locks_the_model if {
	d := operator.classify with input as {"provider": "gemini", "status": 429, "body": gemini_quota_body("37s")}
	d.id == "gemini.model_quota"
	d.reason == "quota_exhausted"
	d.scope == "model"
	d.cooldown_ms == 37000
}

test_gemini_fractional_retry_delay if {
	d := operator.classify with input as {"provider": "gemini", "status": 429, "body": gemini_quota_body("1.5s")}
	d.cooldown_ms == 1500
}

test_gemini_no_retry_info_waits_a_minute if {
	body := json.marshal({"error": {"details": [{
		"@type": "type.googleapis.com/google.rpc.QuotaFailure",
		"violations": [{"quotaDimensions": {"model": "gemini-2.5-pro"}}],
	}]}})
	d := operator.classify with input as {"provider": "gemini", "status": 429, "body": body}
	d.cooldown_ms == 60000
}

test_gemini_project_quota_not_per_model if {
	body := json.marshal({"error": {"details": [{
		"@type": "type.googleapis.com/google.rpc.QuotaFailure",
		"violations": [{"quotaId": "GenerateRequestsPerDayPerProject", "quotaDimensions": {"location": "global"}}],
	}]}})
	not operator.classify with input as {"provider": "gemini", "status": 429, "body": body}
}

test_gemini_plain_text_429_untouched if {
	not operator.classify with input as {"provider": "gemini", "status": 429, "body": "Too Many Requests"}
}
