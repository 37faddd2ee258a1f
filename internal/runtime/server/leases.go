package server

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/engine/lease"
	"github.com/breakwater-dev/breakwater/internal/runtime/leaseapi"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// keyInfo describes the request's authenticated client key for the lease
// API.
func keyInfo(c *fiber.Ctx) leaseapi.KeyInfo {
	k, _ := c.Locals(localsKey).(*clientKey)
	if k == nil {
		return leaseapi.KeyInfo{}
	}
	return leaseapi.KeyInfo{ID: k.id, Scopes: k.scopes, AllowedConnections: k.allow, Authenticated: true}
}

// handleLease serves POST /api/v1/session-leases (client key auth).
func (s *Server) handleLease(c *fiber.Ctx) error {
	r := leaseapi.Handle(c.UserContext(), s.leases, keyInfo(c), c.Get(fiber.HeaderContentType), c.Get(leaseapi.OwnerHeader), c.Body())
	if r.Err != nil {
		s.log.Error("session lease call failed", "error", r.Err)
	}
	for k, v := range r.Headers {
		c.Set(k, v)
	}
	return c.Status(r.Status).Send(r.Body)
}

// leaseContext is the lease a request dispatches under.
type leaseContext struct {
	lease lease.Lease
	allow []string // allowed connection refs of the key
	// holders are the expiries of other owners' leases that held an
	// eligible candidate, for LEASE_CAPACITY_UNAVAILABLE.
	holders []time.Time
}

// prepareLease checks a request's lease headers: with an owner header the
// key must be allowed leases and the generation must fence exactly.
func (s *Server) prepareLease(c *fiber.Ctx, x *exchange) *wire.APIError {
	owner := c.Get(leaseapi.OwnerHeader)
	if owner == "" {
		if c.Get(leaseapi.GenerationHeader) != "" {
			return leaseAPIError(lease.ErrContextRequired)
		}
		return nil
	}
	key := keyInfo(c)
	if err := leaseapi.Authorize(key); err != nil {
		return leaseAPIError(err)
	}
	gen, err := leaseapi.ParseGeneration(c.Get(leaseapi.GenerationHeader))
	if err != nil {
		return leaseAPIError(err)
	}
	l, err := s.leases.Fence(c.UserContext(), key.ID, owner, gen)
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

// leaseAllows reports whether a leased request may use cd (the key's
// allowlist).
func (lc *leaseContext) allows(cd topology.Candidate) bool {
	return slices.Contains(lc.allow, cd.Connection.Ref)
}

// leaseGate decides whether cd may be dispatched with respect to session
// leases: a connection held by another owner's active lease is skipped
// (its expiry remembered), and a leased request binds the connection
// before dispatch. It reports false to skip the candidate.
func (s *Server) leaseGate(ctx context.Context, x *exchange, cd topology.Candidate) bool {
	if x.lease == nil {
		if !s.leasesInUse {
			return true
		}
		if _, until, held := s.leases.Holder(ctx, cd.Connection.Ref); held {
			x.leaseSkips = append(x.leaseSkips, until)
			return false
		}
		return true
	}
	if err := s.leases.Bind(ctx, x.lease.lease, cd.Connection.Ref); err != nil {
		var held *lease.HeldError
		if errors.As(err, &held) {
			x.lease.holders = append(x.lease.holders, held.Until)
			return false
		}
		s.log.Error("binding a session lease", "connection", cd.Connection.Ref, "error", err)
		return false
	}
	x.lease.lease.Connection = cd.Connection.Ref
	return true
}

// leaseCapacityError is the 429 LEASE_CAPACITY_UNAVAILABLE answer when
// every eligible candidate was held by other owners' leases.
func (s *Server) leaseCapacityError(x *exchange) *wire.APIError {
	holders := x.leaseSkips
	if x.lease != nil {
		holders = append(holders, x.lease.holders...)
	}
	if e := lease.Capacity(holders, s.clock.Now()); e != nil {
		return leaseAPIError(e)
	}
	return nil
}
