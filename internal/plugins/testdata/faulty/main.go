// Command faulty is a test guest whose classify hook misbehaves on demand,
// chosen by the input's model: "panic" traps, "loop" never returns, "oom"
// allocates past any memory limit, "badreason" answers a reason the host
// rejects, "pass" declines, "spam" logs 1000 lines with sdk.Log and 1000
// on stdout (each quoting the body) and declines; anything else is a
// rate_limit decision.
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
}

func main() {}
