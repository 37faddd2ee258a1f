package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/series"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// modelCapKey prefixes the store key of the per-model concurrency caps set
// at run time for one connection: modelCapKey + "provider/connection"
// holds {model: cap}, where 0 records a removed cap.
const modelCapKey = "admission/model-concurrency/"

// maxModelCap bounds a per-model concurrency cap.
const maxModelCap = 100_000

// handleConsoleState serves GET /api/console/state: the live state the
// event stream pushes.
func (s *Server) handleConsoleState(c *fiber.Ctx) error {
	return c.JSON(s.consoleSnapshot())
}

// handleConsoleSeries serves GET /api/console/series[?since=RFC3339]: the
// overview samples of the last 15 minutes, oldest first.
func (s *Server) handleConsoleSeries(c *fiber.Ctx) error {
	var since time.Time
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return s.adminError(c, badRequest("since", "must be an RFC 3339 time"))
		}
		since = t
	}
	return c.JSON(fiber.Map{"interval_ms": s.console.interval.Milliseconds(), "span_ms": series.DefaultSpan.Milliseconds(),
		"metrics": s.metrics != nil, "samples": s.console.series.Samples(since)})
}

// handleConsoleRequests serves GET /api/console/requests[?limit=N]: the
// newest requests first.
func (s *Server) handleConsoleRequests(c *fiber.Ctx) error {
	limit := 100
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return s.adminError(c, badRequest("limit", "must be a positive integer"))
		}
		limit = n
	}
	return c.JSON(fiber.Map{"requests": s.console.requests.List(limit)})
}

// handleConsoleRequest serves GET /api/console/requests/:seq.
func (s *Server) handleConsoleRequest(c *fiber.Ctx) error {
	seq, err := strconv.ParseUint(c.Params("seq"), 10, 64)
	if err != nil {
		return s.adminError(c, badRequest("seq", "must be a request number"))
	}
	r, ok := s.console.requests.Get(seq)
	if !ok {
		return s.adminError(c, notFound("request", fmt.Sprintf("request %d is no longer kept", seq)))
	}
	return c.JSON(r)
}

// handleResilienceDefaults serves GET /api/resilience/defaults: the
// built-in value of every resilience setting.
func (s *Server) handleResilienceDefaults(c *fiber.Ctx) error {
	return c.JSON(engine.DefaultSettings())
}

// comboTargetView is one combo target with its current exclusions.
type comboTargetView struct {
	Key        string  `json:"key"`
	Provider   string  `json:"provider,omitempty"`
	Model      string  `json:"model,omitempty"`
	Connection string  `json:"connection,omitempty"`
	Child      string  `json:"child,omitempty"`
	Weight     float64 `json:"weight,omitempty"`
	PriceIn    float64 `json:"price_in,omitempty"`
	PriceOut   float64 `json:"price_out,omitempty"`
	// Eligible counts the connections the target may use now; Excluded
	// says why each other one is skipped (engine Peek, no probe claimed).
	Eligible int               `json:"eligible"`
	Excluded []targetExclusion `json:"excluded"`
	// Current marks the target a sticky strategy is on.
	Current bool `json:"current,omitempty"`
}

// targetExclusion is why one connection of a target is skipped.
type targetExclusion struct {
	Connection string    `json:"connection"`
	Reason     string    `json:"reason"`
	Until      time.Time `json:"until,omitzero"`
	Detail     string    `json:"detail,omitempty"`
}

// comboStateView is one combo with its routing state.
type comboStateView struct {
	Name        string             `json:"name"`
	Strategy    string             `json:"strategy"`
	StickyLimit int                `json:"sticky_limit,omitempty"`
	Source      string             `json:"source"`
	Position    *strategy.Position `json:"position,omitempty"`
	Targets     []comboTargetView  `json:"targets"`
}

// handleConsoleCombos serves GET /api/console/combos: every combo's
// flattened targets with strategy, weights, the sticky position and why
// each target is currently excluded.
func (s *Server) handleConsoleCombos(c *fiber.Ctx) error {
	r := s.view.Load()
	out := []comboStateView{}
	for _, cb := range r.routing.Topology.Combos {
		v := comboStateView{Name: cb.Name, Strategy: cb.Strategy, StickyLimit: cb.StickyLimit, Source: "config", Targets: []comboTargetView{}}
		if v.Strategy == "" {
			v.Strategy = "priority"
		}
		if hasCombo(r.apiCombos, cb.Name) {
			v.Source = "api"
		}
		if pos, ok := s.proxy.StrategyPosition(cb.Name); ok && pos.Strategy == v.Strategy {
			v.Position = &pos
		}
		for _, tg := range cb.Targets {
			tv := s.targetView(tg)
			tv.Current = v.Position != nil && v.Position.Key != "" && v.Position.Key == tg.Key
			v.Targets = append(v.Targets, tv)
		}
		out = append(out, v)
	}
	return c.JSON(fiber.Map{"now": s.clock.Now(), "combos": out})
}

// targetView peeks at every connection a combo target may use.
func (s *Server) targetView(tg topology.ComboTarget) comboTargetView {
	tv := comboTargetView{Key: tg.Key, Model: tg.Model, Weight: tg.Weight, PriceIn: tg.PriceIn, PriceOut: tg.PriceOut, Excluded: []targetExclusion{}}
	if tg.Child != nil {
		tv.Child = tg.Child.Name
		return tv
	}
	if tg.Provider == nil {
		return tv
	}
	tv.Provider = tg.Provider.ID
	conns := tg.Provider.Connections
	if tg.Connection != nil {
		tv.Connection = tg.Connection.ID
		conns = []*topology.Connection{tg.Connection}
	}
	for _, cn := range conns {
		if ex, excluded := s.eng.Peek(tg.Provider.ID, cn.ID, tg.Model); excluded {
			tv.Excluded = append(tv.Excluded, targetExclusion{Connection: cn.ID, Reason: ex.Reason, Until: ex.Until, Detail: ex.Detail})
			continue
		}
		tv.Eligible++
	}
	return tv
}

// modelCapsView is one connection's per-model concurrency caps.
type modelCapsView struct {
	Provider   string         `json:"provider"`
	Connection string         `json:"connection"`
	Models     []string       `json:"models"`
	Caps       map[string]int `json:"caps"`
}

// handleListModelCaps serves GET /api/resilience/model-concurrency.
func (s *Server) handleListModelCaps(c *fiber.Ctx) error {
	out := []modelCapsView{}
	for _, p := range s.view.Load().routing.Topology.Providers {
		for _, cn := range p.Connections {
			caps, err := s.proxy.Admission().ModelConcurrency(p.ID, cn.ID)
			if err != nil {
				continue
			}
			out = append(out, modelCapsView{Provider: p.ID, Connection: cn.ID, Models: p.Models, Caps: caps})
		}
	}
	return c.JSON(fiber.Map{"connections": out})
}

// handleSetModelCap serves PUT /api/resilience/model-concurrency
// {provider, connection, model, cap}: the connection's concurrency cap
// for one model (cap 0 removes it), validated, persisted, then applied to
// the admission gates.
func (s *Server) handleSetModelCap(c *fiber.Ctx) error {
	var req struct {
		Provider   string `json:"provider"`
		Connection string `json:"connection"`
		Model      string `json:"model"`
		Cap        *int   `json:"cap"`
	}
	if e := decodeJSON(c, &req); e != nil {
		return s.adminError(c, e)
	}
	p, ok := s.view.Load().routing.Topology.Provider(req.Provider)
	if !ok {
		return s.adminError(c, badRequest("provider", "unknown provider "+quote(req.Provider)))
	}
	if !slices.ContainsFunc(p.Connections, func(cn *topology.Connection) bool { return cn.ID == req.Connection }) {
		return s.adminError(c, badRequest("connection", fmt.Sprintf("provider %s has no connection %s", p.ID, quote(req.Connection))))
	}
	if !p.Serves(req.Model) {
		return s.adminError(c, badRequest("model", fmt.Sprintf("provider %s does not list model %s", p.ID, quote(req.Model))))
	}
	if req.Cap == nil || *req.Cap < 0 || *req.Cap > maxModelCap {
		return s.adminError(c, badRequest("cap", fmt.Sprintf("must be an integer 0..%d (0 removes the cap)", maxModelCap)))
	}
	s.console.capMu.Lock()
	defer s.console.capMu.Unlock()
	ref := p.ID + "/" + req.Connection
	saved, err := s.savedModelCaps(c.UserContext(), ref)
	if err != nil {
		return s.engineError(c, err)
	}
	saved[req.Model] = *req.Cap
	b, err := json.Marshal(saved)
	if err != nil {
		return s.engineError(c, err)
	}
	if err := s.store.Put(c.UserContext(), modelCapKey+ref, b, 0); err != nil {
		return s.engineError(c, err)
	}
	if err := s.proxy.Admission().SetModelConcurrency(p.ID, req.Connection, req.Model, *req.Cap); err != nil {
		return s.engineError(c, err)
	}
	caps, err := s.proxy.Admission().ModelConcurrency(p.ID, req.Connection)
	if err != nil {
		return s.engineError(c, err)
	}
	return c.JSON(modelCapsView{Provider: p.ID, Connection: req.Connection, Models: p.Models, Caps: caps})
}

// savedModelCaps reads the caps persisted for one connection.
func (s *Server) savedModelCaps(ctx context.Context, ref string) (map[string]int, error) {
	out := map[string]int{}
	b, ok, err := s.store.Get(ctx, modelCapKey+ref)
	if err != nil || !ok {
		return out, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return map[string]int{}, fmt.Errorf("decoding %s: %w", modelCapKey+ref, err)
	}
	return out, nil
}

// restoreModelCaps applies the caps set at run time, over the
// configuration's, at start. Caps of connections or models no longer
// configured are skipped.
func (s *Server) restoreModelCaps(ctx context.Context) error {
	kvs, err := s.store.Scan(ctx, modelCapKey)
	if err != nil {
		return fmt.Errorf("reading model concurrency caps: %w", err)
	}
	topo := s.view.Load().routing.Topology
	for _, kv := range kvs {
		provider, conn, _ := strings.Cut(strings.TrimPrefix(kv.Key, modelCapKey), "/")
		p, ok := topo.Provider(provider)
		if !ok {
			continue
		}
		var caps map[string]int
		if err := json.Unmarshal(kv.Value, &caps); err != nil {
			s.log.Warn("skipping unreadable model concurrency caps", "key", kv.Key, "error", err)
			continue
		}
		for _, model := range slices.Sorted(maps.Keys(caps)) {
			if p.Serves(model) {
				_ = s.proxy.Admission().SetModelConcurrency(provider, conn, model, caps[model]) // unknown connection: skipped
			}
		}
	}
	return nil
}

// notFound is a 404 naming what was not found.
func notFound(what, msg string) *wire.APIError {
	return &wire.APIError{Status: 404, Type: "invalid_request_error", Code: what + "_not_found", Message: msg}
}
