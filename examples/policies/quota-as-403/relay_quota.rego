# relay (a reseller API) answers an exhausted daily quota with 403
# Forbidden and a quota message. Clients treat a 403 as "do not retry", and
# the gateway would cool the key down as an auth error. The quota resets at
# 00:00 UTC.
#
#   restate:  403 + quota text → 429, and tell the client to retry in an
#             hour unless relay sent a retry hint;
#   classify: the 429 is quota_exhausted on the connection, cooled until
#             the reset (the other keys of relay keep serving).
#
# A 403 without the quota text (a key that may not use a model) keeps its
# status; another provider's identical text is not touched.
package breakwater.operator

import data.breakwater.lib

# relay_quota_markers are relay's quota texts, lower-case.
relay_quota_markers := ["daily quota exceeded", "insufficient account quota"]

restate := {"id": "relay.quota_403", "to_status": 429, "retry_after_ms": 3600000} if {
	input.provider == "relay"
	input.status == 403
	lib.contains_any(relay_quota_markers)
}

classify := {"id": "relay.daily_quota", "reason": "quota_exhausted", "scope": "connection", "cooldown_ms": relay_ms_until_reset} if {
	input.provider == "relay"
	input.status == 429
	lib.contains_any(relay_quota_markers)
}

# relay_ms_until_reset is the time from the answer (input.now_ms) to the
# next 00:00 UTC.
relay_ms_until_reset := 86400000 - (input.now_ms % 86400000)
