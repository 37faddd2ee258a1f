// Command quota-header-plugin is an example Breakwater WebAssembly plugin.
// It classifies the custom quota headers of a provider ("Acme") that
// answers an exhausted quota with
//
//	x-acme-quota-remaining: 0
//	x-acme-quota-reset: 3600        (seconds from now, or Unix seconds)
//
// as quota_exhausted on the connection, cooling it down until the reset.
// Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o quota-header.wasm .
//
// and load it with
//
//	plugins:
//	  - {name: acme-quota, path: ./quota-header.wasm, hooks: [classify]}
package main

import "github.com/breakwater-dev/breakwater/sdk"

func init() {
	sdk.HandleClassify(classify)
}

// main is never called: a reactor module only serves the exported hooks.
func main() {}
