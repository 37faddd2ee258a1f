package proxy

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine/lease"
	"github.com/breakwater-dev/breakwater/internal/runtime/leaseapi"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// leaseContext is the session lease a request dispatches under
// (docs/resilience.md §2d).
type leaseContext struct {
	lease lease.Lease
	allow []string // allowed connection refs of the key
	// holders are the expiries of other owners' leases that held an
	// eligible candidate, for LEASE_CAPACITY_UNAVAILABLE.
	holders []time.Time
}

// fenceLease checks the request's lease claim: with an owner the key must
// be allowed leases and the generation must fence exactly; a generation
// without an owner is refused.
func (p *Proxy) fenceLease(ctx context.Context, x *state) *wire.APIError {
	claim := x.req.Lease
	if claim.Owner == "" {
		if claim.Generation != "" {
			return leaseAPIError(lease.ErrContextRequired)
		}
		return nil
	}
	key := x.req.Key
	if err := leaseapi.Authorize(key); err != nil {
		return leaseAPIError(err)
	}
	gen, err := leaseapi.ParseGeneration(claim.Generation)
	if err != nil {
		return leaseAPIError(err)
	}
	l, err := p.leases.Fence(ctx, key.ID, claim.Owner, gen)
	if err != nil {
		return leaseAPIError(err)
	}
	x.lease = &leaseContext{lease: l, allow: key.AllowedConnections}
	return nil
}

func leaseAPIError(err error) *wire.APIError {
	var le *lease.Error
	if !errors.As(err, &le) {
		return &wire.APIError{Status: 500, Type: "server_error", Code: "internal_error", Message: "session lease check failed"}
	}
	e := &wire.APIError{Status: le.Status, Type: le.Type, Code: le.Code, Message: le.Message, RetryAfter: le.RetryAfter}
	if le.State != "" {
		e.Extra = map[string]any{"state": le.State}
	}
	return e
}

// allows reports whether a leased request may use cd (the key's
// allowlist).
func (lc *leaseContext) allows(cd topology.Candidate) bool {
	return slices.Contains(lc.allow, cd.Connection.Ref)
}

// leaseGate decides whether cd may be dispatched with respect to session
// leases: a connection held by another owner's active lease is skipped
// (its expiry remembered), and a leased request binds the connection
// before dispatch. It reports false to skip the candidate.
func (p *Proxy) leaseGate(ctx context.Context, x *state, cd topology.Candidate) bool {
	if x.lease == nil {
		if !p.leasesInUse {
			return true
		}
		if _, until, held := p.leases.Holder(ctx, cd.Connection.Ref); held {
			x.leaseSkips = append(x.leaseSkips, until)
			return false
		}
		return true
	}
	if err := p.leases.Bind(ctx, x.lease.lease, cd.Connection.Ref); err != nil {
		var held *lease.HeldError
		if errors.As(err, &held) {
			x.lease.holders = append(x.lease.holders, held.Until)
			return false
		}
		p.log.Error("binding a session lease", "connection", cd.Connection.Ref, "error", err)
		return false
	}
	x.lease.lease.Connection = cd.Connection.Ref
	return true
}

// leaseCapacityError is the 429 LEASE_CAPACITY_UNAVAILABLE answer when
// every eligible candidate was held by other owners' leases.
func (p *Proxy) leaseCapacityError(x *state) *wire.APIError {
	holders := x.leaseSkips
	if x.lease != nil {
		holders = append(holders, x.lease.holders...)
	}
	if e := lease.Capacity(holders, p.clock.Now()); e != nil {
		return leaseAPIError(e)
	}
	return nil
}
