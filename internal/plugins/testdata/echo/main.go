// Command echo is a test guest that reflects its inputs into its answers so
// the host test can check that every field of every hook type survives the
// trip through the SDK's codec. It also exercises every host function.
package main

import (
	"slices"
	"strconv"
	"strings"

	"github.com/breakwater-dev/breakwater/sdk"
)

func init() {
	sdk.Require(sdk.FeatureLog | sdk.FeatureKV | sdk.FeatureClock)
	sdk.HandleRestate(func(in sdk.ErrorInput) (sdk.Restatement, bool) {
		return sdk.Restatement{Status: in.Status + 1, RetryAfterMS: int64(len(in.Body)), RuleID: describe(in)}, true
	})
	sdk.HandleClassify(func(in sdk.ErrorInput) (sdk.Decision, bool) {
		n := 0
		if v, ok, err := sdk.KVGet("calls"); err != nil {
			sdk.Log(sdk.LevelError, "kv_get: "+err.Error())
		} else if ok {
			n, _ = strconv.Atoi(string(v))
		}
		n++
		if err := sdk.KVSet("calls", []byte(strconv.Itoa(n)), 0); err != nil {
			sdk.Log(sdk.LevelError, "kv_set: "+err.Error())
		}
		sdk.Log(sdk.LevelInfo, "echo classify call "+strconv.Itoa(n))
		return sdk.Decision{Reason: sdk.ReasonTransient, Scope: sdk.ScopeModel,
			CooldownMS: sdk.Now().UnixMilli(), RuleID: describe(in) + "#" + strconv.Itoa(n)}, true
	})
	sdk.HandleOnRequest(func(in sdk.RequestInfo) (sdk.RequestAction, bool) {
		if in.Model == "reject" {
			return sdk.RequestAction{RejectStatus: 403, RejectMessage: "key " + in.KeyID + " may not use " + in.Path}, true
		}
		set := map[string]string{"x-echo-path": in.Path, "x-echo-key": in.KeyID}
		for k, v := range in.Headers.All() {
			set["x-echo-"+k] = v
		}
		return sdk.RequestAction{Model: in.Model + "-rewritten", SetHeaders: set}, true
	})
	sdk.HandleRoute(func(in sdk.RouteInput) (sdk.RouteAnswer, bool) {
		// The last eligible candidate first; the first candidate excluded
		// with every field of the input as the reason.
		a := sdk.RouteAnswer{RuleID: "echo.route"}
		for i := len(in.Candidates) - 1; i > 0; i-- {
			if in.Candidates[i].Eligible {
				a.Order = []int{i}
				break
			}
		}
		a.Exclude = []sdk.RouteExclusion{{Index: 0, Reason: describeRoute(in)}}
		return a, true
	})
}

// describeRoute joins every field of in; the host test computes the same
// string.
func describeRoute(in sdk.RouteInput) string {
	q := in.Request
	var hs []string
	for k, v := range q.Headers.All() {
		hs = append(hs, k+"="+v)
	}
	slices.Sort(hs)
	parts := []string{q.Model, q.Combo, strconv.FormatBool(q.Stream), q.KeyID, strings.Join(hs, ";"),
		strconv.Itoa(q.ToolCount), strconv.Itoa(q.PromptTokens)}
	for _, c := range in.Candidates {
		parts = append(parts, c.Provider, c.Model, c.Connection, strconv.FormatBool(c.Eligible), c.Health,
			strconv.FormatInt(c.CooldownMS, 10), strconv.FormatInt(c.LockoutMS, 10),
			strconv.FormatFloat(c.Headroom, 'g', -1, 64), strconv.FormatInt(c.LatencyMS, 10),
			strconv.Itoa(c.InFlight), strconv.FormatFloat(c.PriceIn, 'g', -1, 64), strconv.FormatFloat(c.PriceOut, 'g', -1, 64))
	}
	return strings.Join(parts, "|")
}

// describe joins every field of in; the host test computes the same string.
func describe(in sdk.ErrorInput) string {
	var hs []string
	for k, v := range in.Headers.All() {
		hs = append(hs, k+"="+v)
	}
	slices.Sort(hs)
	return strings.Join([]string{in.Provider, in.Connection, in.Model, in.Profile, strconv.Itoa(in.Status),
		in.ErrorCode, in.ErrorType, in.Body, strings.Join(hs, ";")}, "|")
}

func main() {}
