# Package breakwater.pipeline gathers the decisions the gateway reads for
# one failed upstream attempt. It only collects them: the gateway validates
# each decision and applies the precedence (operator before built-in,
# restatement before classification), which keeps this evaluation, run on
# every failed attempt, as small as possible.
#
#   decisions  for the status as sent: operator_restate
#              (data.breakwater.operator.restate) and builtin_restate
#              (data.breakwater.restate.decision); when neither is defined,
#              the classifications operator
#              (data.breakwater.operator.classify) and builtin
#              (data.breakwater.classify.decision); when one is, restating
#              is true instead and the classifications are left out
#   classified the classifications only, which the gateway evaluates with
#              input.status set to the restated status (input.restated
#              true) after a restatement, or with the status as sent when
#              a restatement proved invalid
#   judged     everything in one evaluation, for the status as sent:
#              operator_restate and builtin_restate as in decisions,
#              status (the effective status: the first valid
#              restatement's to_status, operator before built-in, else the
#              status as sent) and the classifications operator and builtin
#              judged with input.status set to status (input.restated true
#              when it differs from the status as sent). The gateway still
#              validates the restatements itself and reuses operator and
#              builtin only when it settles on the same status; otherwise
#              (a Go-side restatement, say) it evaluates classified
#   judged_builtin judged for a policy set without operator policies
#
# Undefined decisions are absent.
package breakwater.pipeline

restating if data.breakwater.operator.restate

restating if data.breakwater.restate.decision

decisions.operator_restate := data.breakwater.operator.restate

decisions.builtin_restate := data.breakwater.restate.decision

decisions.restating := true if restating

decisions.operator := data.breakwater.operator.classify if not restating

decisions.builtin := data.breakwater.classify.decision if not restating

classified.operator := data.breakwater.operator.classify

classified.builtin := data.breakwater.classify.decision

judged := object.union(judged_restates, judged_classes)

judged_restates.operator_restate := data.breakwater.operator.restate

judged_restates.builtin_restate := data.breakwater.restate.decision

judged_classes := object.union(c, {"status": s}) if {
	s := effective_status
	s != input.status
	c := classifications with input.status as s with input.restated as true
} else := object.union(classifications, {"status": input.status})

# classifications are the operator and built-in classifications for
# input.status.
classifications.operator := data.breakwater.operator.classify

classifications.builtin := data.breakwater.classify.decision

# effective_status is the to_status of the first valid restatement,
# operator before built-in; undefined when there is none.
effective_status := s if {
	r := data.breakwater.operator.restate
	valid_restate(r)
	s := r.to_status
} else := data.breakwater.restate.decision.to_status

# valid_restate(r) holds when restatement r is one the gateway applies: an
# integral to_status that is an HTTP status other than the status as sent,
# and no retry_after_ms or an integral one not negative.
valid_restate(r) if {
	to := r.to_status
	is_number(to)
	floor(to) == to
	to >= 100
	to <= 599
	to != input.status
	valid_retry_after(r)
}

valid_retry_after(r) if not "retry_after_ms" in object.keys(r)

valid_retry_after(r) if {
	ms := r.retry_after_ms
	is_number(ms)
	floor(ms) == ms
	ms >= 0
}

# judged_builtin is judged for a policy set without operator policies: it
# never looks the operator decisions up (each lookup of an absent document
# costs), and takes the shortest path for a built-in restatement: the
# built-in catalogue judges the restated status as its argument
# (data.breakwater.classify.decision_for), where `with input.status as ...`
# would copy the whole input.
judged_builtin := {"builtin_restate": r, "status": s, "builtin": c} if {
	r := data.breakwater.restate.decision
	s := r.to_status
	s != input.status
	c := data.breakwater.classify.decision_for(s)
} else := {"builtin_restate": r, "status": s} if {
	r := data.breakwater.restate.decision
	s := r.to_status
	s != input.status
} else := object.union(builtin_judged, {"status": input.status})

builtin_judged.builtin_restate := data.breakwater.restate.decision

builtin_judged.builtin := data.breakwater.classify.decision
