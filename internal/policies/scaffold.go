package policies

import (
	"fmt"
	"regexp"
	"strings"
)

// scaffoldName is what Scaffold accepts: a Rego-friendly identifier.
var scaffoldName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// Scaffold returns the text of a new operator policy file NAME.rego and
// its test NAME_test.rego (`breakwater policy new NAME`): a classify rule
// for a placeholder provider called name, with tests that pass as they
// stand, so that `breakwater policy test` is green before the operator
// edits anything. Scaffolds with different names coexist in one
// directory. name must be a lower-case identifier (letters, digits, "_",
// starting with a letter).
func Scaffold(name string) (rule, test string, err error) {
	if !scaffoldName.MatchString(name) {
		return "", "", fmt.Errorf("policy name %q: use lower-case letters, digits and _, starting with a letter (it names the rule and its tests)", name)
	}
	r := strings.NewReplacer("NAME", name)
	return r.Replace(scaffoldRule), r.Replace(scaffoldTest), nil
}

const scaffoldRule = `# NAME: describe the provider behaviour this rule handles, and why.
#
# Scaffolded by ` + "`breakwater policy new NAME`" + `; docs/policies.md explains the
# input document, the two rule shapes and how to test and explain them.
# Every operator file adds definitions to the same two rules (restate,
# classify) of package breakwater.operator: keep the conditions of each
# definition specific (the provider first), so that two files never
# decide the same attempt differently.
package breakwater.operator

import data.breakwater.lib

# NAME_markers are the (lower-case) texts of the error body this rule
# looks for.
NAME_markers := ["capacity"]

# Classify the provider's 503 "capacity" answers as a rate limit of the
# connection, cooled down for 30 s. Replace the provider id, the status,
# the markers and the decision with your provider's.
classify := {"id": "NAME", "reason": "rate_limit", "scope": "connection", "cooldown_ms": 30000} if {
	input.provider == "NAME"
	input.status == 503
	lib.contains_any(NAME_markers)
}

# To correct a status before classification, add a restatement:
#
# restate := {"id": "NAME.restate", "to_status": 429, "retry_after_ms": 60000} if {
# 	input.provider == "NAME"
# 	input.status == 403
# 	lib.contains_any(NAME_markers)
# }
`

const scaffoldTest = `# Tests of NAME.rego, run by ` + "`breakwater policy test DIR`" + ` and before every
# reload: a file set whose tests fail is rejected.
package breakwater.operator_test

import data.breakwater.operator

test_NAME_classifies_capacity if {
	d := operator.classify with input as {"provider": "NAME", "status": 503, "body": "{\"error\":{\"message\":\"No capacity left\"}}"}
	d.id == "NAME"
	d.reason == "rate_limit"
	d.scope == "connection"
	d.cooldown_ms == 30000
}

test_NAME_other_status_untouched if {
	not operator.classify with input as {"provider": "NAME", "status": 500, "body": "no capacity"}
}

test_NAME_other_provider_untouched if {
	not operator.classify with input as {"provider": "another-provider", "status": 503, "body": "no capacity"}
}
`
