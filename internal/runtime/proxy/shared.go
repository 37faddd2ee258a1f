package proxy

import (
	"context"
	"strings"

	"github.com/breakwater-dev/breakwater/internal/engine/affinity"
	"github.com/breakwater-dev/breakwater/internal/engine/lease"
)

// StoreChanged applies a change another gateway instance sharing the
// state store made to a key the proxy keeps in memory: a rate-limit
// protection flag (re-read), a session pin or a lease record (their
// cached copies dropped). It reports whether key is one of the proxy's.
func (p *Proxy) StoreChanged(ctx context.Context, key string) (bool, error) {
	switch {
	case strings.HasPrefix(key, protectionKey):
		return true, restoreProtection(ctx, p.store, p.adm)
	case strings.HasPrefix(key, affinity.KeyPrefix):
		p.pins.Forget(key)
		return true, nil
	case strings.HasPrefix(key, lease.KeyPrefix):
		p.leases.Forget(key)
		return true, nil
	}
	return false, nil
}

// StoreResync re-reads everything StoreChanged covers, after changes may
// have been missed.
func (p *Proxy) StoreResync(ctx context.Context) error {
	p.pins.ForgetAll()
	p.leases.ForgetAll()
	return restoreProtection(ctx, p.store, p.adm)
}
