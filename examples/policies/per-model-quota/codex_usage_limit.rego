# codex (a subscription relay for coding agents) meters usage per family
# of models: every gpt-5* model on a key draws on one usage limit, while the
# key's other models have their own. When the family's limit runs out it
# answers 429 with an error of type usage_limit_reached and the seconds
# until the reset:
#
#   {"error": {"type": "usage_limit_reached", "resets_in_seconds": 8100,
#              "message": "You've hit your usage limit for GPT-5 models. ..."}}
#
# Left to the defaults, a 429 cools the whole key. This rule scopes the
# failure to the model, with the reset as its cooldown. A model-scoped wait
# that long is a model lockout on that key (resilience.md §3 "Model-scoped
# quota"), and it covers the model's quota family when the provider
# declares one, so the configuration pairs the rule with
#
#   providers:
#     - id: codex
#       quota_families: {gpt-5: ["gpt-5*"]}
#
# and a request for any gpt-5* model skips that key until the reset, while
# o4-mini on the same key keeps flowing.
package breakwater.operator

classify := {"id": "codex.family_usage_limit", "reason": "quota_exhausted", "scope": "model", "cooldown_ms": codex_reset_ms} if {
	input.provider == "codex"
	input.status == 429
	input.error.type == "usage_limit_reached"
}

# codex_reset_ms is the answer's resets_in_seconds in milliseconds, an
# hour when it gives none.
codex_reset_ms := ms if {
	s := json.unmarshal(input.body).error.resets_in_seconds
	is_number(s)
	s > 0
	ms := round(s * 1000)
} else := 3600000
