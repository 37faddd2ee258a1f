// Command route-plugin is an example Breakwater routing plugin: the route
// hook of a combo whose strategy is "plugin:<name>". It orders the combo's
// targets
//
//   - by a request header: "x-route-provider: anthropic" puts that
//     provider's targets first (the client, or an on_request plugin, picks
//     the provider);
//   - otherwise by the time of day (UTC, from the gateway's clock): in
//     peak hours (08:00–20:00) the fastest targets first, and targets
//     whose provider's breaker is degraded are left out while a healthy
//     one remains; off-peak the cheapest targets first.
//
// Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o route.wasm .
//
// and use it in a combo:
//
//	plugins:
//	  - {name: tod, path: ./route.wasm, hooks: [route]}
//	combos:
//	  - name: smart
//	    strategy: plugin:tod
//	    targets: [{model: openai/gpt-4o-mini}, {model: anthropic/claude-haiku-4}]
package main

import "github.com/breakwater-dev/breakwater/sdk"

func init() {
	sdk.HandleRoute(route)
}

// main is never called: a reactor module only serves the exported hooks.
func main() {}
