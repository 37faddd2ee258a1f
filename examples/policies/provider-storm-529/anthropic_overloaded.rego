# Anthropic answers 529 overloaded_error when its API as a whole is
# overloaded, whichever key sent the request: a provider-wide storm, not a
# fault of one connection. Left to the defaults, every key that meets the
# storm fails on its own. This rule declares it provider-wide: a server
# error of the provider, so that no connection of anthropic is cooled for
# it and the request fails over to the next target of its combo.
#
# The same overload can arrive inside a 200 stream as an overloaded_error
# event (judged like a 529); the second definition matches the error type
# whatever the status.
package breakwater.operator

anthropic_storm := {"id": "anthropic.overloaded", "reason": "server_error", "scope": "provider", "cooldown_ms": 20000}

classify := anthropic_storm if {
	input.provider == "anthropic"
	input.status == 529
}

classify := anthropic_storm if {
	input.provider == "anthropic"
	input.error.type == "overloaded_error"
}
