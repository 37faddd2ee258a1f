// Package sdk is the guest SDK for Breakwater WebAssembly plugins. The
// plugin ABI is not published yet; this package only fixes the module path.
package sdk

// ABIVersionMajor is the plugin ABI major version this SDK targets; 0 means
// unreleased.
const ABIVersionMajor = 0
