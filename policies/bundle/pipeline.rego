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
