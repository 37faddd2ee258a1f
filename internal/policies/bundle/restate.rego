# Package breakwater.restate is the built-in status restatement catalogue
# (docs/resilience.md §10): some gateways report a temporary quota exhaustion
# with a status clients treat as fatal (403, sometimes 400). A restatement
# rule corrects the status before any classification, so the fallback
# engine, combo aggregation and the client all see the corrected status.
#
# Each rule is data:
#
#   id                      stable rule id, reported as Outcome.RuleID
#   provider                provider id the rule is for (markers stay
#                           provider-specific: the same text from another
#                           provider is never restated)
#   from_statuses           upstream statuses the rule restates
#   to_status               the corrected status
#   text_markers            lower-case markers; one must occur in the error
#                           text (input.text)
#   exclude_markers         lower-case markers that veto the rule
#   default_retry_after_ms  Retry-After told to the client when the upstream
#                           gave no retry hint of its own (an upstream hint
#                           wins); it never sets an internal cooldown
#
# decision is the first matching rule in catalogue order, as
# {id, to_status, retry_after_ms}. A status already equal to to_status (an
# incoming 429) is never restated: no rule lists it in from_statuses.
package breakwater.restate

rules := [{
	# agentrouter (a new-api based gateway) answers 403, sometimes 400,
	# with "用户额度不足" ("user quota insufficient") or "额度不足" when the
	# account's renewable quota is used up. "无权访问模型" ("no access to
	# this model", e.g. "该令牌无权访问模型 x") is an entitlement error
	# and keeps its status.
	"id": "agentrouter.quota_429",
	"provider": "agentrouter",
	"from_statuses": [400, 403],
	"to_status": 429,
	"text_markers": ["用户额度不足", "额度不足"],
	"exclude_markers": ["无权访问模型"],
	"default_retry_after_ms": 60000,
}]

# decision is the first matching rule's restatement. The comprehension
# keeps the catalogue order and tests the cheap, usually failing conditions
# first: this runs on every failed attempt. A rule whose text markers match
# more than once is listed more than once, which does not change the first.
# Markers are matched against input.text (see data.breakwater.lib.text).
decision := {"id": r.id, "to_status": r.to_status, "retry_after_ms": r.default_retry_after_ms} if {
	matching := [r |
		some r in rules
		r.provider == input.provider
		input.status in r.from_statuses
		count([m | some m in r.exclude_markers; contains(input.text, m)]) == 0
		some m in r.text_markers
		contains(input.text, m)
	]
	r := matching[0]
}
