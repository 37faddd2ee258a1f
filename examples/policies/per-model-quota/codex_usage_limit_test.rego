package breakwater.operator_test

import data.breakwater.operator

codex_limit_body(resets) := json.marshal({"error": {
	"type": "usage_limit_reached", "resets_in_seconds": resets,
	"message": "You've hit your usage limit for GPT-5 models.",
}})

test_codex_family_limit_locks_the_model_until_the_reset if {
	d := operator.classify with input as {
		"provider": "codex", "model": "gpt-5-codex", "status": 429,
		"error": {"code": "", "type": "usage_limit_reached"}, "body": codex_limit_body(8100),
	}
	d.id == "codex.family_usage_limit"
	d.reason == "quota_exhausted"
	d.scope == "model"
	d.cooldown_ms == 8100000
}

test_codex_limit_without_reset_waits_an_hour if {
	d := operator.classify with input as {
		"provider": "codex", "status": 429, "error": {"code": "", "type": "usage_limit_reached"},
		"body": `{"error":{"type":"usage_limit_reached","message":"Usage limit reached."}}`,
	}
	d.cooldown_ms == 3600000
}

test_codex_plain_rate_limit_untouched if {
	not operator.classify with input as {
		"provider": "codex", "status": 429, "error": {"code": "", "type": "rate_limit_exceeded"},
		"body": `{"error":{"type":"rate_limit_exceeded","message":"Slow down"}}`,
	}
}

test_other_provider_untouched if {
	not operator.classify with input as {
		"provider": "openai", "status": 429, "error": {"code": "", "type": "usage_limit_reached"},
		"body": codex_limit_body(60),
	}
}
