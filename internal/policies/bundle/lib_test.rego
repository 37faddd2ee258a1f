package breakwater.lib_test

import data.breakwater.lib

test_text_joins_body_code_and_type if {
	lib.text == "rate limited insufficient_quota billing_error" with input as {
		"body": "Rate Limited",
		"error": {"code": "insufficient_quota", "type": "Billing_Error"},
	}
}

plain := {"body": "Plain BODY", "error": {"code": "", "type": ""}, "headers": {}}

test_text_with_empty_error_fields if {
	lib.text == "plain body  " with input as plain
}

test_text_from_input if {
	lib.text == "given" with input as object.union(plain, {"text": "given"})
}

test_contains_any if {
	lib.contains_any(["nope", "body"]) with input as plain
	not lib.contains_any(["nope"]) with input as plain
}

test_header_zero if {
	lib.header_zero(["x-ratelimit-remaining"]) with input as {"headers": {"x-ratelimit-remaining-requests": " 0"}}
	not lib.header_zero(["x-ratelimit-remaining"]) with input as {"headers": {"x-ratelimit-remaining-requests": "12"}}
	not lib.header_zero(["x-ratelimit-remaining"]) with input as {"headers": {"x-ratelimit-limit-requests": "0"}}
	not lib.header_zero(["x-ratelimit-remaining"]) with input as {"headers": {}}
}

test_status_in if {
	lib.status_in([]) with input as {"status": 500}
	lib.status_in([400, 403]) with input as {"status": 403}
	not lib.status_in([400, 403]) with input as {"status": 429}
}

test_provider_is if {
	lib.provider_is("") with input as {"provider": "x"}
	lib.provider_is("x") with input as {"provider": "x"}
	not lib.provider_is("y") with input as {"provider": "x"}
}
