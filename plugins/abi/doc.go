// Package abi is the contract between the Breakwater plugin host and its
// WebAssembly guests: export and import names, version and feature
// constants, and the data exchanged by each hook. It imports no WASM
// runtime, so guests and host share it.
package abi
