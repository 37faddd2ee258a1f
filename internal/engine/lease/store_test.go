package lease

import (
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
)

// newMemStore is the gateway's in-memory store (atomic CompareAndSet, TTLs
// judged against clock).
func newMemStore(clock engine.Clock) engine.Store { return memstore.New(clock) }
