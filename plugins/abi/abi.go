package abi

import (
	"strconv"
	"strings"
)

// VersionMajor is the ABI major version of this contract. A host loads only
// guests with the same major.
const VersionMajor = 1

// VersionMinor is the ABI minor version of this contract. Minors of one
// major are backward compatible additions: 1.1 added FeatureBinary, 1.2
// the route hook (FeatureRoute).
const VersionMinor = 2

// Feature is one bit of the set a guest returns from ExportFeatures.
type Feature uint64

// Feature bits. The hook bits say which hooks a guest implements; the
// capability bits say which host functions a guest cannot work without.
const (
	// FeatureRestate: the guest exports ExportRestate.
	FeatureRestate Feature = 1 << 0
	// FeatureClassify: the guest exports ExportClassify.
	FeatureClassify Feature = 1 << 1
	// FeatureOnRequest: the guest exports ExportOnRequest.
	FeatureOnRequest Feature = 1 << 2
	// FeatureLog: the guest needs ImportLog.
	FeatureLog Feature = 1 << 3
	// FeatureKV: the guest needs a working ImportKVGet and ImportKVSet (a
	// host without a state store refuses it).
	FeatureKV Feature = 1 << 4
	// FeatureClock: the guest needs ImportNowMS.
	FeatureClock Feature = 1 << 5
	// FeatureBinary: the guest reads hook inputs and writes hook answers in
	// the binary encoding instead of JSON (since ABI 1.1).
	FeatureBinary Feature = 1 << 6
	// FeatureRoute: the guest exports ExportRoute (since ABI 1.2).
	FeatureRoute Feature = 1 << 7

	// FeaturesKnown is every bit this minor version defines.
	FeaturesKnown = FeatureRestate | FeatureClassify | FeatureOnRequest |
		FeatureLog | FeatureKV | FeatureClock | FeatureBinary | FeatureRoute
)

// featureNames lists the name of each known bit, lowest first.
var featureNames = [...]string{"restate", "classify", "on_request", "log", "kv", "clock", "binary", "route"}

// Names returns the names of the set bits, lowest first ("classify", "log",
// ...); an unknown bit is named "bit<N>".
func (f Feature) Names() []string {
	var out []string
	for i := 0; i < 64; i++ {
		if f&(1<<i) == 0 {
			continue
		}
		if i < len(featureNames) {
			out = append(out, featureNames[i])
		} else {
			out = append(out, "bit"+strconv.Itoa(i))
		}
	}
	return out
}

// String returns the names of the set bits joined with "|", or "none".
func (f Feature) String() string {
	if f == 0 {
		return "none"
	}
	return strings.Join(f.Names(), "|")
}

// Hook names as they appear in the configuration (plugins[].hooks).
const (
	HookRestate   = "restate"
	HookClassify  = "classify"
	HookOnRequest = "on_request"
	HookRoute     = "route"
)

// HookFeature returns the feature bit and export name of a hook, and false
// for an unknown hook name.
func HookFeature(hook string) (Feature, string, bool) {
	switch hook {
	case HookRestate:
		return FeatureRestate, ExportRestate, true
	case HookClassify:
		return FeatureClassify, ExportClassify, true
	case HookOnRequest:
		return FeatureOnRequest, ExportOnRequest, true
	case HookRoute:
		return FeatureRoute, ExportRoute, true
	}
	return 0, "", false
}

// Export names: the functions (and memory) every guest provides.
const (
	// ExportMemory is the guest's linear memory.
	ExportMemory = "memory"
	// ExportInitialize is the optional WASI reactor initialiser, called once
	// per instance before any other export.
	ExportInitialize = "_initialize"
	// ExportStart is the WASI command entry point; a guest must not have it.
	ExportStart = "_start"
	// ExportVersionMajor: () -> i32, the guest's VersionMajor.
	ExportVersionMajor = "breakwater_abi_version_major"
	// ExportVersionMinor: () -> i32, the guest's VersionMinor.
	ExportVersionMinor = "breakwater_abi_version_minor"
	// ExportFeatures: () -> i64, the guest's Feature set.
	ExportFeatures = "breakwater_features"
	// ExportAlloc: (size i32) -> i32, a guest buffer of at least size bytes,
	// reserved for the host until the next call of ExportAlloc.
	ExportAlloc = "breakwater_alloc"
	// ExportRestate: (ptr, len i32) -> i64, ErrorInput in, Restatement out.
	ExportRestate = "breakwater_restate"
	// ExportClassify: (ptr, len i32) -> i64, ErrorInput in, Decision out.
	ExportClassify = "breakwater_classify"
	// ExportOnRequest: (ptr, len i32) -> i64, RequestInfo in, RequestAction
	// out.
	ExportOnRequest = "breakwater_on_request"
	// ExportRoute: (ptr, len i32) -> i64, RouteInput in, RouteAnswer out
	// (since ABI 1.2).
	ExportRoute = "breakwater_route"
)

// ValueType is a WebAssembly value type, with its binary-format encoding.
type ValueType byte

// The value types the contract uses.
const (
	I32 ValueType = 0x7f
	I64 ValueType = 0x7e
)

// String returns "i32" or "i64" (or "0x.." for another type).
func (v ValueType) String() string {
	switch v {
	case I32:
		return "i32"
	case I64:
		return "i64"
	}
	return "0x" + strconv.FormatUint(uint64(v), 16)
}

// Signature is a function type: its parameter and result types.
type Signature struct {
	Params  []ValueType
	Results []ValueType
}

// String renders the signature as "(i32, i32) -> i64".
func (s Signature) String() string {
	return "(" + joinTypes(s.Params) + ") -> (" + joinTypes(s.Results) + ")"
}

// Equal reports whether s and o have the same parameters and results.
func (s Signature) Equal(o Signature) bool {
	return string(typesBytes(s.Params)) == string(typesBytes(o.Params)) &&
		string(typesBytes(s.Results)) == string(typesBytes(o.Results))
}

func typesBytes(ts []ValueType) []byte {
	b := make([]byte, len(ts))
	for i, t := range ts {
		b[i] = byte(t)
	}
	return b
}

func joinTypes(ts []ValueType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}

// ExportSignature returns the required signature of an exported function,
// and false for a name that is not a contract function export (including
// ExportMemory).
func ExportSignature(name string) (Signature, bool) {
	switch name {
	case ExportInitialize:
		return Signature{}, true
	case ExportVersionMajor, ExportVersionMinor:
		return Signature{Results: []ValueType{I32}}, true
	case ExportFeatures:
		return Signature{Results: []ValueType{I64}}, true
	case ExportAlloc:
		return Signature{Params: []ValueType{I32}, Results: []ValueType{I32}}, true
	case ExportRestate, ExportClassify, ExportOnRequest, ExportRoute:
		return Signature{Params: []ValueType{I32, I32}, Results: []ValueType{I64}}, true
	}
	return Signature{}, false
}

// ImportModule is the module name of the host functions.
const ImportModule = "breakwater"

// Host function names in ImportModule.
const (
	// ImportLog: (level, ptr, len i32), log a message.
	ImportLog = "log"
	// ImportKVGet: (key_ptr, key_len, buf_ptr, buf_cap i32) -> i32, the value
	// length (copied when it fits in buf_cap), KVNotFound or KVFailed.
	ImportKVGet = "kv_get"
	// ImportKVSet: (key_ptr, key_len, val_ptr, val_len i32, ttl_ms i64) ->
	// i32, KVOK or KVFailed. An empty value deletes the key.
	ImportKVSet = "kv_set"
	// ImportNowMS: () -> i64, the host clock in Unix milliseconds.
	ImportNowMS = "now_ms"
)

// ImportSignature returns the signature of a host function, and false for
// an unknown name.
func ImportSignature(name string) (Signature, bool) {
	switch name {
	case ImportLog:
		return Signature{Params: []ValueType{I32, I32, I32}}, true
	case ImportKVGet:
		return Signature{Params: []ValueType{I32, I32, I32, I32}, Results: []ValueType{I32}}, true
	case ImportKVSet:
		return Signature{Params: []ValueType{I32, I32, I32, I32, I64}, Results: []ValueType{I32}}, true
	case ImportNowMS:
		return Signature{Results: []ValueType{I64}}, true
	}
	return Signature{}, false
}

// Results of ImportKVGet and ImportKVSet.
const (
	// KVOK: kv_set stored (or deleted) the value.
	KVOK int32 = 0
	// KVNotFound: kv_get found no live value for the key.
	KVNotFound int32 = -1
	// KVFailed: the key or value is out of bounds, the host has no store, or
	// the store failed (the host logs why).
	KVFailed int32 = -2
)

// LogLevel is the level argument of ImportLog. The values match hclog's.
type LogLevel int32

// Log levels; the host treats anything outside Trace..Error as Info.
const (
	LogTrace LogLevel = 1
	LogDebug LogLevel = 2
	LogInfo  LogLevel = 3
	LogWarn  LogLevel = 4
	LogError LogLevel = 5
)

// Bounds the host enforces.
const (
	// MaxKeyBytes bounds a KV key.
	MaxKeyBytes = 256
	// MaxValueBytes bounds a KV value.
	MaxValueBytes = 64 << 10
	// MaxLogBytes bounds a log message; the host truncates longer ones.
	MaxLogBytes = 4 << 10
	// MaxBodyBytes bounds ErrorInput.Body; the host truncates longer bodies
	// (on a rune boundary). Error bodies that matter fit; the cap bounds the
	// copies into and inside the guest (and a JSON guest's decoding).
	MaxBodyBytes = 4 << 10
	// MaxAnswerBytes bounds a hook's answer.
	MaxAnswerBytes = 64 << 10
	// MaxRouteCandidates bounds RouteInput.Candidates; the host offers a
	// route hook no more (the candidates after it keep their order, after
	// the ones the hook ranked).
	MaxRouteCandidates = 256
	// MaxRouteHeaders bounds RouteRequest.Headers; the host keeps the
	// first names in sorted order.
	MaxRouteHeaders = 32
	// MaxRouteHeaderBytes bounds one RouteRequest header value; longer
	// values are cut (on a rune boundary).
	MaxRouteHeaderBytes = 1 << 10
)

// PackPtrLen packs a guest pointer and length into a hook result: pointer in
// the high 32 bits, length in the low 32 bits.
func PackPtrLen(ptr, length uint32) uint64 {
	return uint64(ptr)<<32 | uint64(length)
}

// UnpackPtrLen splits a hook result into pointer and length.
func UnpackPtrLen(v uint64) (ptr, length uint32) {
	return uint32(v >> 32), uint32(v)
}
