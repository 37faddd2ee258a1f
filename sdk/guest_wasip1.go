//go:build wasip1

//lint:file-ignore U1000 the exports are called by the host (//go:wasmexport).

package sdk

import (
	"errors"
	"time"
	"unsafe"
)

// This file is the guest side of the ABI: the exports the host calls and
// the host functions the SDK wraps. It builds only for GOOS=wasip1; the
// native build (host_native.go) replaces the host functions with in-memory
// fakes.

// inBuf is the buffer breakwater_alloc hands to the host; the host may
// reuse it for many calls until the next breakwater_alloc.
var inBuf []byte

// outBuf holds the last answer until the next call into the instance.
var outBuf []byte

//go:wasmexport breakwater_abi_version_major
func exportVersionMajor() int32 { return ABIVersionMajor }

//go:wasmexport breakwater_abi_version_minor
func exportVersionMinor() int32 { return ABIVersionMinor }

//go:wasmexport breakwater_features
func exportFeatures() int64 { return int64(Features()) }

//go:wasmexport breakwater_alloc
func exportAlloc(size uint32) uint32 {
	if uint32(cap(inBuf)) < size || inBuf == nil {
		inBuf = make([]byte, max(size, 1024))
	}
	inBuf = inBuf[:cap(inBuf)]
	return ptrOf(inBuf)
}

//go:wasmexport breakwater_restate
func exportRestate(ptr, n uint32) uint64 { return answer(dispatchRestate(input(ptr, n), outBuf[:0])) }

//go:wasmexport breakwater_classify
func exportClassify(ptr, n uint32) uint64 { return answer(dispatchClassify(input(ptr, n), outBuf[:0])) }

//go:wasmexport breakwater_on_request
func exportOnRequest(ptr, n uint32) uint64 {
	return answer(dispatchOnRequest(input(ptr, n), outBuf[:0]))
}

//go:wasmexport breakwater_route
func exportRoute(ptr, n uint32) uint64 { return answer(dispatchRoute(input(ptr, n), outBuf[:0])) }

// input returns the n bytes at ptr, which must lie inside inBuf (the only
// memory the host may write); anything else reads as empty input.
func input(ptr, n uint32) []byte {
	base := ptrOf(inBuf)
	if ptr < base || uint64(ptr-base)+uint64(n) > uint64(len(inBuf)) {
		return nil
	}
	off := ptr - base
	return inBuf[off : off+n]
}

// answer keeps b alive in outBuf and packs its address for the host.
func answer(b []byte, ok bool) uint64 {
	outBuf = b
	if !ok || len(b) == 0 {
		return 0
	}
	return uint64(ptrOf(b))<<32 | uint64(len(b))
}

func ptrOf(b []byte) uint32 {
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

func strPtr(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

//go:wasmimport breakwater log
//go:noescape
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

//go:wasmimport breakwater kv_get
//go:noescape
func hostKVGet(keyPtr unsafe.Pointer, keyLen uint32, bufPtr unsafe.Pointer, bufCap uint32) int32

//go:wasmimport breakwater kv_set
//go:noescape
func hostKVSet(keyPtr unsafe.Pointer, keyLen uint32, valPtr unsafe.Pointer, valLen uint32, ttlMS int64) int32

//go:wasmimport breakwater now_ms
func hostNowMS() int64

// Results of kv_get and kv_set (the host's abi.KV* constants).
const (
	kvOK       = 0
	kvNotFound = -1
	kvFailed   = -2
)

// errKV is returned when the host refuses or fails a KV operation; the host
// logs the cause.
var errKV = errors.New("sdk: host KV operation failed (see the gateway log)")

// Log writes msg to the gateway's log for this plugin (logger
// "plugin.<name>") at level. Messages longer than MaxLogBytes are
// truncated by the host.
func Log(level LogLevel, msg string) {
	if len(msg) > MaxLogBytes {
		msg = msg[:MaxLogBytes]
	}
	hostLog(int32(level), strPtr(msg), uint32(len(msg)))
}

// kvBuf is reused by KVGet for values that fit.
var kvBuf = make([]byte, 512)

// KVGet returns the value stored under key in the plugin's private
// namespace of the gateway's state store, and whether it exists. An error
// means the key is invalid (empty or longer than MaxKeyBytes), the gateway
// has no store, or the store failed.
func KVGet(key string) ([]byte, bool, error) {
	if key == "" || len(key) > MaxKeyBytes {
		return nil, false, errKV
	}
	for {
		n := hostKVGet(strPtr(key), uint32(len(key)), unsafe.Pointer(unsafe.SliceData(kvBuf)), uint32(len(kvBuf)))
		switch {
		case n == kvNotFound:
			return nil, false, nil
		case n < 0:
			return nil, false, errKV
		case int(n) <= len(kvBuf):
			return append([]byte(nil), kvBuf[:n]...), true, nil
		}
		kvBuf = make([]byte, n)
	}
}

// KVSet stores value under key in the plugin's private namespace, expiring
// after ttl (0 = never; rounded down to milliseconds). An empty value
// deletes the key. The write counts against the hook call's deadline.
func KVSet(key string, value []byte, ttl time.Duration) error {
	if key == "" || len(key) > MaxKeyBytes || len(value) > MaxValueBytes || ttl < 0 {
		return errKV
	}
	if hostKVSet(strPtr(key), uint32(len(key)), unsafe.Pointer(unsafe.SliceData(value)), uint32(len(value)), ttl.Milliseconds()) != kvOK {
		return errKV
	}
	return nil
}

// Now returns the gateway's clock (which tests may drive); prefer it to
// time.Now, which the host backs with the same clock at millisecond
// resolution.
func Now() time.Time { return time.UnixMilli(hostNowMS()) }
