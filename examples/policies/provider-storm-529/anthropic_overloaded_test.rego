package breakwater.operator_test

import data.breakwater.operator

anthropic_overloaded_body := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`

test_anthropic_529_is_provider_wide if {
	d := operator.classify with input as {"provider": "anthropic", "status": 529, "body": anthropic_overloaded_body, "error": {"code": "", "type": "overloaded_error"}}
	d.id == "anthropic.overloaded"
	d.reason == "server_error"
	d.scope == "provider"
}

test_anthropic_overloaded_type_any_status if {
	d := operator.classify with input as {"provider": "anthropic", "status": 500, "error": {"code": "", "type": "overloaded_error"}}
	d.scope == "provider"
}

test_anthropic_rate_limit_not_provider_wide if {
	not operator.classify with input as {"provider": "anthropic", "status": 429, "error": {"code": "", "type": "rate_limit_error"}}
}

test_other_provider_529_untouched if {
	not operator.classify with input as {"provider": "openai", "status": 529, "error": {"code": "", "type": "overloaded_error"}}
}
