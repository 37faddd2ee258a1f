package policies

import (
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// evalCache is the topdown.VirtualCache of one evaluation: the values of
// the rules (virtual documents) the evaluation has computed, in frames
// (OPA pushes a frame for each `with` and pops it after). OPA's own cache
// is a tree of hash maps, one per reference segment, allocated anew for
// every evaluation; a pipeline evaluation computes a few dozen documents,
// so a flat list searched from its end costs less, and evalCaches are
// pooled. An evalCache serves one evaluation at a time (one goroutine).
type evalCache struct {
	// frames holds, for each pushed frame, the index in entries where it
	// starts; the top frame is the last.
	frames  []int
	entries []cacheEntry
	// terms backs the entries' references, copied on Put.
	terms []*ast.Term
}

// cacheEntry is one cached reference. Like OPA's cache, a reference put
// undefined stays undefined in its frame.
type cacheEntry struct {
	ref       ast.Ref
	value     *ast.Term
	undefined bool
}

var _ topdown.VirtualCache = (*evalCache)(nil)

// evalCachePool pools evalCaches between evaluations; its zero value is
// ready and it is goroutine-safe.
type evalCachePool struct{ pool sync.Pool }

// get returns an empty evalCache; release it with put once the evaluation
// has returned.
func (p *evalCachePool) get() *evalCache {
	if c, ok := p.pool.Get().(*evalCache); ok {
		return c
	}
	return &evalCache{frames: []int{0}}
}

// put empties c, dropping its references to the evaluation's values, and
// returns it to the pool.
func (p *evalCachePool) put(c *evalCache) {
	clear(c.entries)
	clear(c.terms)
	c.entries, c.terms, c.frames = c.entries[:0], c.terms[:0], append(c.frames[:0], 0)
	p.pool.Put(c)
}

// Push opens a new, empty frame.
func (c *evalCache) Push() { c.frames = append(c.frames, len(c.entries)) }

// Pop drops the top frame and its entries.
func (c *evalCache) Pop() {
	if len(c.frames) <= 1 {
		return
	}
	top := c.frames[len(c.frames)-1]
	clear(c.entries[top:])
	c.entries = c.entries[:top]
	c.frames = c.frames[:len(c.frames)-1]
}

// find returns the index of ref's entry in the top frame, or -1.
func (c *evalCache) find(ref ast.Ref) int {
	top := c.frames[len(c.frames)-1]
	for i := len(c.entries) - 1; i >= top; i-- {
		if c.entries[i].ref.Equal(ref) {
			return i
		}
	}
	return -1
}

// Get returns ref's cached value; undefined reports a reference cached as
// undefined. (nil, false) means not cached.
func (c *evalCache) Get(ref ast.Ref) (*ast.Term, bool) {
	i := c.find(ref)
	if i < 0 {
		return nil, false
	}
	if c.entries[i].undefined {
		return nil, true
	}
	return c.entries[i].value, false
}

// Put caches value for ref in the top frame; a nil value records ref as
// undefined.
func (c *evalCache) Put(ref ast.Ref, value *ast.Term) {
	i := c.find(ref)
	if i < 0 {
		start := len(c.terms)
		c.terms = append(c.terms, ref...)
		c.entries = append(c.entries, cacheEntry{ref: ast.Ref(c.terms[start:len(c.terms):len(c.terms)])})
		i = len(c.entries) - 1
	}
	if value != nil {
		c.entries[i].value = value
	} else {
		c.entries[i].undefined = true
	}
}

// Keys returns the references with a value in the top frame.
func (c *evalCache) Keys() []ast.Ref {
	var out []ast.Ref
	for _, e := range c.entries[c.frames[len(c.frames)-1]:] {
		if e.value != nil {
			out = append(out, e.ref)
		}
	}
	return out
}
