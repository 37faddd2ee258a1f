package lease

import (
	"strings"
	"sync"
	"time"
)

// KeyPrefix is the store key prefix of every lease record.
const KeyPrefix = "lease/"

// holderView caches Holder's answer per connection ref, so routing an
// unleased request does not read the store for every candidate (with a
// shared Redis store that would be two round trips on the success path).
// An entry is dropped when this Manager changes the records behind it
// and, through Forget, when another gateway instance does; a "held"
// entry lapses by itself at the lease's expiry. It is goroutine-safe.
type holderView struct {
	mu sync.Mutex
	m  map[string]holderEntry
	// version counts drops; a store read is cached only if no drop
	// happened meanwhile, so it cannot bring back a stale answer.
	version uint64
}

// holderEntry is one cached answer.
type holderEntry struct {
	owner string
	until time.Time
	held  bool
}

// get returns the cached answer for ref and whether there is one.
func (v *holderView) get(ref string) (holderEntry, uint64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.m[ref]
	return e, v.version, ok
}

// put caches e for ref if nothing was dropped since version.
func (v *holderView) put(ref string, e holderEntry, version uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.version != version {
		return
	}
	if v.m == nil {
		v.m = make(map[string]holderEntry)
	}
	v.m[ref] = e
}

// drop removes the entries that match.
func (v *holderView) drop(match func(ref string, e holderEntry) bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.version++
	for ref, e := range v.m {
		if match(ref, e) {
			delete(v.m, ref)
		}
	}
}

func (v *holderView) dropRef(ref string) {
	v.drop(func(r string, _ holderEntry) bool { return r == ref })
}

func (v *holderView) dropOwner(sha string) {
	v.drop(func(_ string, e holderEntry) bool { return e.owner == sha })
}

// Forget drops what Holder cached about store key key (a connection
// claim or an owner record): the receiving end of a lease another
// gateway instance changed. Other keys are ignored.
func (m *Manager) Forget(key string) {
	switch {
	case strings.HasPrefix(key, keyConn):
		m.view.dropRef(strings.TrimPrefix(key, keyConn))
	case strings.HasPrefix(key, keyOwner):
		m.view.dropOwner(strings.TrimPrefix(key, keyOwner))
	}
}

// ForgetAll drops every cached Holder answer (after changes may have been
// missed).
func (m *Manager) ForgetAll() {
	m.view.drop(func(string, holderEntry) bool { return true })
}
