// Command guest is a Go WebAssembly reactor used by the interrupt package's
// tests: exports that spin forever, sum a buffer, and do string, map,
// allocation and sorting work whose results must not change when the module
// is instrumented.
package main

import (
	"hash/fnv"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"
)

func main() {}

//go:wasmimport env started
func started()

var (
	sink []byte
	buf  [4096]byte
)

// spin tells the host it started, then loops forever without calls.
//
//go:wasmexport spin
func spin() {
	started()
	for {
		sink = append(sink[:0], 1)
	}
}

// bufPtr returns the address of the 4 KiB buffer summed by sum.
//
//go:wasmexport buf_ptr
func bufPtr() uint32 {
	return uint32(uintptr(unsafe.Pointer(&buf[0])))
}

// sum adds up the first n bytes of the buffer.
//
//go:wasmexport sum
func sum(n int32) uint32 {
	var s uint32
	for _, c := range buf[:n] {
		s += uint32(c)
	}
	return s
}

// rng is a xorshift generator so results depend only on the seed.
type rng uint64

func (r *rng) next() uint64 {
	x := uint64(*r)
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*r = rng(x)
	return x
}

// strWork builds, transforms and hashes strings.
//
//go:wasmexport str_work
func strWork(n int32) uint64 {
	var b strings.Builder
	for i := int32(0); i < n; i++ {
		b.WriteString("item-")
		b.WriteString(strconv.Itoa(int(i) * 7919))
		b.WriteByte(',')
	}
	s := strings.ToUpper(b.String())
	s = strings.ReplaceAll(s, "ITEM", "it")
	parts := strings.Split(s, ",")
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(strings.TrimPrefix(p, "it-")))
	}
	return h.Sum64() ^ uint64(len(parts))
}

// mapWork fills a map, deletes some keys and sums the rest.
//
//go:wasmexport map_work
func mapWork(n int32) uint64 {
	r := rng(uint64(n)*2654435761 + 1)
	m := make(map[uint64]uint64)
	for i := int32(0); i < n; i++ {
		k := r.next() % uint64(n*2+1)
		m[k] += uint64(i)
	}
	for k := range m {
		if k%3 == 0 {
			delete(m, k)
		}
	}
	var s uint64
	for k, v := range m {
		s += k*31 + v
	}
	return s ^ uint64(len(m))<<48
}

// allocWork allocates many short-lived slices and collects garbage.
//
//go:wasmexport alloc_work
func allocWork(n int32) uint64 {
	var keep [][]uint64
	var s uint64
	for i := int32(0); i < n; i++ {
		b := make([]uint64, 64+int(i)%200)
		for j := range b {
			b[j] = uint64(i) * uint64(j)
		}
		s += b[len(b)-1]
		if i%16 == 0 {
			keep = append(keep, b)
		}
	}
	runtime.GC()
	for _, b := range keep {
		s += uint64(len(b))
	}
	return s
}

// sortWork sorts pseudo-random numbers and strings and hashes the order.
//
//go:wasmexport sort_work
func sortWork(n int32) uint64 {
	r := rng(uint64(n) + 99)
	xs := make([]int64, n)
	for i := range xs {
		xs[i] = int64(r.next()>>1) - 1<<61
	}
	slices.Sort(xs)
	ss := make([]string, n)
	for i := range ss {
		ss[i] = strconv.FormatUint(r.next()%100000, 36)
	}
	sort.Strings(ss)
	h := fnv.New64a()
	for i := range xs {
		h.Write([]byte(strconv.FormatInt(xs[i], 16)))
		h.Write([]byte(ss[i]))
	}
	return h.Sum64()
}
