// Package abi is the contract between the Breakwater plugin host and its
// WebAssembly guests: export and import names, version and feature
// constants, and the data exchanged by each hook. It imports no WASM
// runtime, so guests and host share it.
//
// # Version
//
// The contract is versioned major.minor (VersionMajor, VersionMinor). A guest
// exports its version as two functions, breakwater_abi_version_major and
// breakwater_abi_version_minor, both () -> i32. The host refuses a guest
// whose major differs from its own; minors only add (new feature bits, new
// imports, new optional exports), so any minor of the same major loads, and
// a guest that needs something newer declares it with a feature bit.
//
// # Features
//
// A guest exports breakwater_features () -> i64, a bit set of Feature values:
// the hooks it implements (FeatureRestate, FeatureClassify, FeatureOnRequest,
// FeatureRoute)
// and the host capabilities it cannot work without (FeatureLog, FeatureKV,
// FeatureClock). The host refuses a guest that sets a bit it does not know or
// cannot serve (FeatureKV without a state store), and refuses a plugin whose
// configured hooks are not all implemented.
//
// # Exports
//
// Every guest exports its linear memory as "memory" and the functions below
// (ExportSignature gives each signature as data):
//
//	breakwater_abi_version_major() i32
//	breakwater_abi_version_minor() i32
//	breakwater_features() i64
//	breakwater_alloc(size i32) i32
//	breakwater_restate(ptr i32, len i32) i64     // when FeatureRestate
//	breakwater_classify(ptr i32, len i32) i64    // when FeatureClassify
//	breakwater_on_request(ptr i32, len i32) i64  // when FeatureOnRequest
//	breakwater_route(ptr i32, len i32) i64       // when FeatureRoute (1.2)
//
// A WASI reactor (Go's -buildmode=c-shared) also exports _initialize, which
// the host calls once per instance before anything else; a guest must not
// export _start (a command module exits after main and cannot serve calls).
//
// # Calling a hook
//
// The host encodes the hook input (see Encodings), calls breakwater_alloc(len) to get a
// guest buffer of at least len bytes, writes the input there and calls the
// hook export with (ptr, len). The guest keeps that buffer reserved for the
// host until its next breakwater_alloc call, so a host may reuse one buffer
// for many calls on the same instance and call breakwater_alloc again only
// when an input does not fit.
//
// A hook returns an i64: 0 means "no decision" (the host goes on with the
// next plugin, then its built-in rules); anything else packs the pointer and
// length of an encoded answer (PackPtrLen: pointer in the high 32 bits, length in
// the low 32 bits). The answer stays valid until the next call into the
// instance; the host copies or decodes it at once. An answer that is out of
// bounds, longer than MaxAnswerBytes, not a valid encoding of the hook's
// output type, or semantically invalid (see the output types) counts as a plugin
// error and the host falls back to its built-in decision.
//
// An instance serves one call at a time (the host pins one instance to one
// call and pools instances), so a guest needs no locking. Every call runs
// under a deadline; a guest that traps or overruns it is closed and
// replaced, and its call counts as an error.
//
// # Imports
//
// The host provides the module ImportModule ("breakwater") with:
//
//	log(level i32, ptr i32, len i32)
//	kv_get(key_ptr i32, key_len i32, buf_ptr i32, buf_cap i32) i32
//	kv_set(key_ptr i32, key_len i32, val_ptr i32, val_len i32, ttl_ms i64) i32
//	now_ms() i64
//
// log writes a message of at most MaxLogBytes at a LogLevel into the host's
// logger of the plugin. kv_get copies the value of key into buf when it fits
// and returns its length (a length above buf_cap means "call again with a
// bigger buffer"), or KVNotFound, or KVFailed. kv_set stores a value of at
// most MaxValueBytes (ttl_ms 0 = no expiry; an empty value deletes the key)
// and returns KVOK or KVFailed. Keys are 1..MaxKeyBytes bytes and private to
// the plugin: the host stores them as "plugin/<name>/<key>". now_ms returns
// the host clock in Unix milliseconds; the host also backs WASI's wall clock
// with the same clock.
//
// Guests may import wasi_snapshot_preview1 (Go's runtime does); stdout and
// stderr go to the plugin's logger, there is no file system and no network.
//
// # Encodings
//
// Hook inputs and outputs are exchanged in one of two encodings, chosen by
// the guest: JSON by default, or the binary encoding when the guest sets
// FeatureBinary (ABI 1.1; the Go SDK always does). The pairs are:
//
//	restate:    ErrorInput   -> Restatement
//	classify:   ErrorInput   -> Decision
//	on_request: RequestInfo  -> RequestAction
//	route:      RouteInput   -> RouteAnswer   (since ABI 1.2)
//
// JSON: UTF-8 JSON objects with the field names of the struct tags in this
// package. Unknown input fields must be ignored by guests (a minor version
// may add fields); unknown answer fields are ignored by the host.
//
// Binary: each value is its fields in struct declaration order, nothing
// between and nothing after. An int is 8 bytes little-endian two's
// complement; a string is a u32 little-endian byte length followed by that
// many bytes of UTF-8; a map is a u32 little-endian pair count followed by
// that many (key string, value string) pairs. So an ErrorInput is
// provider, connection, model, profile (strings), status (int), headers
// (map), error_code, error_type, body (strings), and a Decision is reason,
// scope (strings), cooldown_ms (int), rule_id (string). The binary layout of
// a type never changes within a major version; a later minor that adds
// fields does so behind a new feature bit. AppendErrorInputBinary and the
// other Append…Binary / Decode…Binary functions implement it. The host
// rejects an answer that is truncated, has bytes after its last field, or
// holds a string that is not UTF-8.
//
// The route hook's types (ABI 1.2) add three forms: a bool is one byte, 0
// or 1; a float is the 8 bytes of its IEEE 754 binary64 bits,
// little-endian; a list is a u32 little-endian element count followed by
// the elements. A RouteInput is the request's model, combo (strings),
// stream (bool), key_id (string), headers (map), tool_count and
// prompt_tokens (ints), then the candidates as a list, each provider,
// model, connection (strings), eligible (bool), health (string),
// cooldown_ms, lockout_ms (ints), headroom (float), latency_ms, in_flight
// (ints), price_in, price_out (floats). A RouteAnswer is order (a list of
// ints), exclude (a list of index int and reason string) and rule_id
// (string).
//
// # The route hook
//
// A combo whose strategy is "plugin:<name>" asks plugin <name>'s route hook
// to order its targets for every request it routes — the success path, so
// keep the hook lean. The answer's Order and Exclude index
// RouteInput.Candidates; RouteAnswer says how it is applied and what makes
// it invalid. A hook that declines (returns 0), traps, overruns its
// deadline or answers an invalid order leaves the combo in its configured
// (priority) order; a failure counts as the plugin's error.
package abi
