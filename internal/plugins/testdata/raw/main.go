// Command raw is a test guest written against the ABI without the SDK. Its
// classify hook answers garbage (or, for an input mentioning "badreason",
// well-formed JSON with an unknown reason), its on_request hook answers a
// pointer outside memory, and its restate export has the wrong signature.
// Build with -ldflags=-X=main.abiMajor=2 to get a guest of another major.
package main

import (
	"bytes"
	"strconv"
	"unsafe"
)

var abiMajor = "1"

var buf = make([]byte, 64<<10)

var answer []byte

//go:wasmexport breakwater_abi_version_major
func versionMajor() int32 {
	n, _ := strconv.Atoi(abiMajor)
	return int32(n)
}

//go:wasmexport breakwater_abi_version_minor
func versionMinor() int32 { return 0 }

//go:wasmexport breakwater_features
func features() int64 { return 1 | 2 | 4 } // restate, classify, on_request

//go:wasmexport breakwater_alloc
func alloc(size uint32) uint32 {
	if int(size) > len(buf) {
		buf = make([]byte, size)
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
}

//go:wasmexport breakwater_classify
func classify(ptr, n uint32) uint64 {
	answer = []byte(`{"reason": "quota_exhausted", oops`)
	if bytes.Contains(buf[:n], []byte("badreason")) {
		answer = []byte(`{"reason":"sunny"}`)
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(answer))))<<32 | uint64(len(answer))
}

//go:wasmexport breakwater_on_request
func onRequest(ptr, n uint32) uint64 {
	return uint64(0xffff_ff00)<<32 | 200
}

//go:wasmexport breakwater_restate
func restate(n uint32) uint32 { return n }

func main() {}
