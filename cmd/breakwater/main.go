// Command breakwater is the Breakwater LLM API gateway: serve, the
// fault-injecting mock upstream, config validation and version.
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := newRootCommand().Execute(); err != nil {
		var ee exitError
		if asExit(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "breakwater:", err)
		os.Exit(1)
	}
}
