package admission

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// Gate levels as GateStats names them.
const (
	GateGlobal   = "global"
	GateProvider = "provider"
	GateAccount  = "account"
	GateModel    = "model"
)

// GateStats is one gate of the composite concurrency gate (docs/resilience.md
// §5): its cap, the permits held and the requests waiting for it.
type GateStats struct {
	// Level is GateGlobal, GateProvider, GateAccount or GateModel;
	// Provider, Connection and Model name the gate as far as the level
	// needs.
	Level      string `json:"level"`
	Provider   string `json:"provider,omitempty"`
	Connection string `json:"connection,omitempty"`
	Model      string `json:"model,omitempty"`
	Cap        int    `json:"cap"`
	Held       int    `json:"held"`
	Waiting    int    `json:"waiting"`
}

// Gates returns every gate that has a cap or holds permits, global first,
// then providers, accounts and models, each sorted by name. It is
// consistent across gates.
func (m *Manager) Gates() []GateStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	conns := slices.SortedFunc(maps.Values(*m.conns.Load()), func(a, b *conn) int {
		return cmp.Or(cmp.Compare(a.provider, b.provider), cmp.Compare(a.id, b.id))
	})
	m.gates.mu.Lock()
	defer m.gates.mu.Unlock()
	var out []GateStats
	add := func(g GateStats, n *gateCounter) {
		if n.cap > 0 || n.held > 0 {
			g.Cap, g.Held, g.Waiting = max(n.cap, 0), n.held, n.waiting
			out = append(out, g)
		}
	}
	add(GateStats{Level: GateGlobal}, &m.global)
	for _, p := range slices.Sorted(maps.Keys(m.providers)) {
		add(GateStats{Level: GateProvider, Provider: p}, m.providers[p])
	}
	for _, c := range conns {
		add(GateStats{Level: GateAccount, Provider: c.provider, Connection: c.id}, &c.account)
	}
	for _, c := range conns {
		for _, model := range slices.Sorted(maps.Keys(c.models)) {
			add(GateStats{Level: GateModel, Provider: c.provider, Connection: c.id, Model: model}, c.models[model])
		}
	}
	return out
}

// ModelConcurrency returns a copy of the connection's per-model caps
// (rate_limit_overrides.model_concurrency as currently applied). It
// returns an error wrapping ErrUnknownConnection for a connection never
// registered.
func (m *Manager) ModelConcurrency(provider, connection string) (map[string]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.lookup(provider, connection)
	if c == nil {
		return nil, fmt.Errorf("model concurrency of %s/%s: %w", provider, connection, ErrUnknownConnection)
	}
	out := make(map[string]int, len(c.spec.ModelConcurrency))
	for k, v := range c.spec.ModelConcurrency {
		if v > 0 {
			out[k] = v
		}
	}
	return out, nil
}

// SetModelConcurrency sets the connection's concurrency cap for model at
// run time (limit ≤ 0 removes the cap). Running requests keep their
// permits; queued requests re-evaluate against the new cap at once, and a
// lowered cap admits no new request until the running ones fall below it.
// It returns an error wrapping ErrUnknownConnection for a connection never
// registered; an empty model is an error. The caller persists the cap.
func (m *Manager) SetModelConcurrency(provider, connection, model string, limit int) error {
	if model == "" {
		return fmt.Errorf("model concurrency of %s/%s: empty model", provider, connection)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.lookup(provider, connection)
	if c == nil {
		return fmt.Errorf("model concurrency of %s/%s: %w", provider, connection, ErrUnknownConnection)
	}
	caps := maps.Clone(c.spec.ModelConcurrency)
	if caps == nil {
		caps = map[string]int{}
	}
	if limit > 0 {
		caps[model] = limit
	} else {
		delete(caps, model)
	}
	c.spec.ModelConcurrency = caps
	m.rebuildLocked(c)
	return nil
}
