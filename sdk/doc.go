// Package sdk is the guest SDK for Breakwater WebAssembly plugins written in
// plain Go. A plugin is a main package that registers its hooks from init
// and is built as a WASI reactor:
//
//	package main
//
//	import "github.com/breakwater-dev/breakwater/sdk"
//
//	func init() {
//		sdk.HandleClassify(func(in sdk.ErrorInput) (sdk.Decision, bool) {
//			if in.Headers.Get("x-acme-quota-remaining") != "0" {
//				return sdk.Decision{}, false // let the gateway decide
//			}
//			sdk.Log(sdk.LevelInfo, "acme quota exhausted on "+in.Connection)
//			return sdk.Decision{Reason: sdk.ReasonQuotaExhausted, Scope: sdk.ScopeConnection}, true
//		})
//	}
//
//	func main() {}
//
//	// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o my-rules.wasm .
//
// The SDK provides every export the host needs (ABI version, features,
// alloc and a trampoline per hook) and wraps the host functions: Log,
// KVGet, KVSet and Now. In a native build (anything but GOOS=wasip1) the
// host functions are in-memory fakes (FakeLogs, SetNow, ResetFakes) and
// CallClassify, CallRestate, CallOnRequest and CallRoute run the
// registered handlers through the same binary encoding the host uses, so
// plugin logic is unit tested with a plain `go test`. Routing plugins
// register with HandleRoute (ABI 1.2).
//
// A guest instance serves one hook call at a time; handlers need no
// locking. A handler that panics traps its instance: the host logs the
// panic, counts an error, discards the instance and uses its built-in
// decision.
//
// This module depends on nothing but the standard library.
package sdk
