package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
)

// apiCombosKey is the store key of the combos defined through the admin
// API (a JSON list); they override file combos of the same name.
const apiCombosKey = "combos/api"

// view is what the server shows of one routing: the /v1/models answer and
// the combos defined through the admin API. It is immutable; the proxy
// routes with its routing.
type view struct {
	routing   *proxy.Routing
	models    *modelCatalog
	apiCombos []config.Combo
}

// loadAPICombos reads the persisted admin-API combos.
func (s *Server) loadAPICombos(ctx context.Context) ([]config.Combo, error) {
	b, ok, err := s.store.Get(ctx, apiCombosKey)
	if err != nil || !ok {
		return nil, err
	}
	var out []config.Combo
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", apiCombosKey, err)
	}
	return out, nil
}

// buildView validates the file configuration with apiCombos merged in (an
// API combo replaces a file combo of the same name) and builds the
// routing view over the file topology's providers and connections (shared,
// with what their upstreams reported); the file's topology is used as is
// when there are no API combos.
func (s *Server) buildView(apiCombos []config.Combo) (*view, error) {
	topo := s.fileTopology
	if len(apiCombos) > 0 {
		cfg := *s.cfg
		cfg.Combos = mergeCombos(s.cfg.Combos, apiCombos)
		config.ApplyDefaults(&cfg)
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		var err error
		if topo, err = s.fileTopology.WithCombos(cfg.Combos); err != nil {
			return nil, err
		}
	}
	return &view{routing: s.proxy.NewRouting(topo), models: modelsList(topo), apiCombos: apiCombos}, nil
}

// install makes v the routing of new requests; the caller holds comboMu.
func (s *Server) install(v *view) {
	s.view.Store(v)
	s.proxy.SetRouting(v.routing)
}

func mergeCombos(file, api []config.Combo) []config.Combo {
	out := make([]config.Combo, 0, len(file)+len(api))
	for _, c := range file {
		if !hasCombo(api, c.Name) {
			out = append(out, c)
		}
	}
	return append(out, api...)
}

func hasCombo(cs []config.Combo, name string) bool {
	for _, c := range cs {
		if c.Name == name {
			return true
		}
	}
	return false
}

// comboView is a combo as the admin API shows it.
type comboView struct {
	config.Combo
	Source string `json:"source"`
}

// handleListCombos serves GET /api/combos.
func (s *Server) handleListCombos(c *fiber.Ctx) error {
	r := s.view.Load()
	out := []comboView{}
	for _, cb := range mergeCombos(s.cfg.Combos, r.apiCombos) {
		src := "config"
		if hasCombo(r.apiCombos, cb.Name) {
			src = "api"
		}
		out = append(out, comboView{Combo: cb, Source: src})
	}
	return c.JSON(fiber.Map{"combos": out})
}

// handlePutCombo serves PUT /api/combos/:name: defines or replaces a combo
// at run time. It is validated like the configuration file (a cycle or an
// unknown target is a 400 and nothing changes), persisted, then swapped in
// atomically; requests in flight keep the view they started with.
func (s *Server) handlePutCombo(c *fiber.Ctx) error {
	name, e := pathParam(c, "name")
	if e != nil {
		return s.adminError(c, e)
	}
	var cb config.Combo
	dec := json.NewDecoder(strings.NewReader(string(c.Body())))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cb); err != nil {
		return s.adminError(c, badRequest("body", "want a combo object: "+err.Error()))
	}
	if cb.Name == "" {
		cb.Name = name
	}
	if cb.Name != name {
		return s.adminError(c, badRequest("name", fmt.Sprintf("%q does not match the path's %q", cb.Name, name)))
	}
	s.comboMu.Lock()
	defer s.comboMu.Unlock()
	cur := s.view.Load()
	next := make([]config.Combo, 0, len(cur.apiCombos)+1)
	for _, x := range cur.apiCombos {
		if x.Name != name {
			next = append(next, x)
		}
	}
	next = append(next, cb)
	return s.commitCombos(c, next)
}

// handleDeleteCombo serves DELETE /api/combos/:name for a combo defined
// through the admin API.
func (s *Server) handleDeleteCombo(c *fiber.Ctx) error {
	name, e := pathParam(c, "name")
	if e != nil {
		return s.adminError(c, e)
	}
	s.comboMu.Lock()
	defer s.comboMu.Unlock()
	cur := s.view.Load()
	if !hasCombo(cur.apiCombos, name) {
		if hasCombo(s.cfg.Combos, name) {
			return s.adminError(c, badRequest("name", fmt.Sprintf("combo %q is defined in the configuration file; edit the file instead", name)))
		}
		return s.adminError(c, badRequest("name", fmt.Sprintf("no combo %q was defined through the admin API", name)))
	}
	next := make([]config.Combo, 0, len(cur.apiCombos))
	for _, x := range cur.apiCombos {
		if x.Name != name {
			next = append(next, x)
		}
	}
	return s.commitCombos(c, next)
}

// commitCombos validates, persists and installs a new list of API
// combos; the caller holds comboMu.
func (s *Server) commitCombos(c *fiber.Ctx, next []config.Combo) error {
	v, err := s.buildView(next)
	if err != nil {
		var ve *config.ValidationError
		if errors.As(err, &ve) && len(ve.Errors) > 0 {
			return s.adminError(c, badRequest(ve.Errors[0].Path, ve.Errors[0].Message))
		}
		return s.adminError(c, badRequest("combo", err.Error()))
	}
	b, err := json.Marshal(next)
	if err != nil {
		return s.engineError(c, err)
	}
	if err := s.store.Put(c.UserContext(), apiCombosKey, b, 0); err != nil {
		return s.engineError(c, err)
	}
	s.install(v)
	return s.handleListCombos(c)
}
