// Command faulty is a test guest whose classify hook misbehaves on demand,
// chosen by the input's model: "panic" traps, "loop" never returns, "oom"
// allocates past any memory limit, "badreason" answers a reason the host
// rejects, "pass" declines, "spam" logs 1000 lines with sdk.Log and 1000
// on stdout (each quoting the body) and declines; anything else is a
// rate_limit decision. Its route hook misbehaves the same way, chosen by
// the request's model: "panic", "loop", "garbage" (an index out of range),
// "excludeall" (every candidate excluded), "pass"; anything else reverses
// the candidates.
package main

import (
	"os"
	"strconv"

	"github.com/breakwater-dev/breakwater/sdk"
)

var sink []byte

func init() {
	sdk.Require(sdk.FeatureLog)
	sdk.HandleClassify(func(in sdk.ErrorInput) (sdk.Decision, bool) {
		switch in.Model {
		case "panic":
			panic("faulty guest: deliberate panic")
		case "loop":
			for {
				sink = append(sink[:0], 1)
			}
		case "oom":
			sink = make([]byte, 64<<20)
			sink[len(sink)-1] = 1
		case "badreason":
			return sdk.Decision{Reason: "sunny"}, true
		case "pass":
			return sdk.Decision{}, false
		case "spam":
			for i := range 1000 {
				sdk.Log(sdk.LevelWarn, "spam "+strconv.Itoa(i)+": upstream said "+in.Body)
				_, _ = os.Stdout.WriteString("stdout spam " + strconv.Itoa(i) + "\n")
			}
			return sdk.Decision{}, false
		}
		return sdk.Decision{Reason: sdk.ReasonRateLimit, Scope: sdk.ScopeConnection, RuleID: "faulty.ok"}, true
	})
	sdk.HandleRoute(func(in sdk.RouteInput) (sdk.RouteAnswer, bool) {
		n := len(in.Candidates)
		switch in.Request.Model {
		case "panic":
			panic("faulty guest: deliberate panic in route")
		case "loop":
			for {
				sink = append(sink[:0], 1)
			}
		case "garbage":
			return sdk.RouteAnswer{Order: []int{n + 7}}, true
		case "excludeall":
			var a sdk.RouteAnswer
			for i := range n {
				a.Exclude = append(a.Exclude, sdk.RouteExclusion{Index: i, Reason: "all"})
			}
			return a, true
		case "pass":
			return sdk.RouteAnswer{}, false
		}
		a := sdk.RouteAnswer{RuleID: "faulty.reverse"}
		for i := n - 1; i >= 0; i-- {
			a.Order = append(a.Order, i)
		}
		return a, true
	})
}

func main() {}
