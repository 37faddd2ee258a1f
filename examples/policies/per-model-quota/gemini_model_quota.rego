# Gemini gives every model its own quota (requests per minute and per day,
# per project and model). When one model's quota runs out it answers 429
# RESOURCE_EXHAUSTED with a QuotaFailure naming the model, and a RetryInfo
# saying when to come back:
#
#   {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
#     {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
#      "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
#                      "quotaDimensions": {"model": "gemini-2.5-pro", ...}}]},
#     {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}
#
# The key itself is fine: its other models keep their quota. Left to the
# defaults a 429 cools the whole connection. This rule scopes the failure
# to the model (a model lockout on that connection, with the lockout layer
# enabled: resilience.model_lockout.enabled) for as long as RetryInfo
# says, 60 s when it says nothing. It covers the whole family of per-model
# quotas: any violation whose quota dimensions name a model.
package breakwater.operator

classify := {"id": "gemini.model_quota", "reason": "quota_exhausted", "scope": "model", "cooldown_ms": gemini_retry_ms} if {
	input.provider == "gemini"
	input.status == 429
	gemini_model_violation
}

# gemini_details are the error details of a Google error body (undefined
# for a body that is not JSON).
gemini_details := json.unmarshal(input.body).error.details

# gemini_model_violation holds when a QuotaFailure violation names a model.
gemini_model_violation if {
	some d in gemini_details
	endswith(d["@type"], "google.rpc.QuotaFailure")
	some v in d.violations
	v.quotaDimensions.model != ""
}

# gemini_retry_ms is RetryInfo's retryDelay ("37s", "1.5s") in
# milliseconds, else 60 s.
gemini_retry_ms := ms if {
	some d in gemini_details
	endswith(d["@type"], "google.rpc.RetryInfo")
	ms := round(to_number(trim_suffix(d.retryDelay, "s")) * 1000)
} else := 60000
