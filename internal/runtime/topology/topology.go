// Package topology is the routable view of the configuration: providers,
// their connections and models, and combos, with the resolution of a
// client's model name into an ordered list of upstream candidates.
package topology

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
)

// Provider is one upstream service.
type Provider struct {
	ID string
	// Adapter is the provider kind's wire protocol: endpoints, credential
	// header, translators and stream event reader.
	Adapter     *provider.Adapter
	Profile     engine.Profile
	BaseURL     string
	Models      []string
	models      map[string]struct{}
	Connections []*Connection
	// EgressBucketed marks an upstream that buckets quota per egress IP
	// (§12): the gateway records each connection's egress address.
	EgressBucketed bool
}

// Serves reports whether the provider lists model.
func (p *Provider) Serves(model string) bool {
	_, ok := p.models[model]
	return ok
}

// Connection is one account / key of a provider.
type Connection struct {
	Provider     *Provider
	ID           string
	APIKey       string
	LocalAddress string
	ProxyURL     string
	// Ref is "provider/connection", the connection's global name.
	Ref string
	// LowPriorityMode, AutoLimitReset and OrganizationUUID opt a Claude
	// subscription connection into the usage-wall handling of §2b.
	LowPriorityMode, AutoLimitReset bool
	OrganizationUUID                string
	// Reported is the quota the connection's upstream last reported to
	// this instance (x-ratelimit-* headers), nil until the first report;
	// the request loop writes it and reads it for the headroom order. A
	// topology rebuilt from a configuration starts without reports; one
	// derived by WithCombos shares them.
	Reported atomic.Pointer[strategy.Quota]
}

// Candidate is one upstream attempt a request may make.
type Candidate struct {
	Provider   *Provider
	Connection *Connection
	// Model is the upstream model id sent to the executor.
	Model string
	// Combo and Target name the combo target this candidate came from
	// (nil / -1 outside combos), for the strategy's bookkeeping.
	Combo  *Combo
	Target int
}

// Combo is a named virtual model over targets.
type Combo struct {
	Name        string
	Strategy    string
	StickyLimit int
	Targets     []ComboTarget
	// Judge (fusion) and Summariser (context-relay) are model names the
	// gateway resolves like any client model.
	Judge, Summariser string
	MaxParallel       int
	AutoWeights       map[string]float64
}

// ComboTarget is one target of a combo: a provider model (optionally
// pinned to a connection) or a child combo executed as one target.
type ComboTarget struct {
	// Key is the target's stable id: "provider/model",
	// "provider/model@connection" or "combo:name".
	Key        string
	Provider   *Provider
	Model      string
	Connection *Connection // nil = any connection of the provider
	// Child is set for a nested combo in mode execute: it routes with its
	// own strategy, as one target of the parent.
	Child         *Combo
	Weight        float64
	PriceIn       float64
	PriceOut      float64
	ContextWindow int
	// System is the pipeline step's system prompt.
	System string
}

// Topology is the immutable routable view of a configuration. It is safe
// for concurrent use.
type Topology struct {
	Providers []*Provider
	providers map[string]*Provider
	Combos    []*Combo
	combos    map[string]*Combo
	// Warnings are non-fatal remarks produced while building.
	Warnings []string
	// resolved holds each name's Resolution, built on its first Resolve:
	// resolving a name then costs the same whatever the number of its
	// candidates. Only names that resolve are kept, so it holds at most
	// the configuration's addressable names.
	resolved sync.Map // string → Resolution
}

// Build turns a validated configuration into a Topology. It rejects combo
// targets naming unknown providers, models or connections, and cycles of
// nested combos (naming the path).
func Build(cfg *config.Config) (*Topology, error) {
	t := &Topology{providers: map[string]*Provider{}, combos: map[string]*Combo{}}
	for _, pc := range cfg.Providers {
		a, err := provider.For(pc.Kind, provider.Options{ResponsesAPI: pc.ResponsesAPI, OAuth: pc.Profile == config.ProfileOAuth})
		if err != nil {
			return nil, fmt.Errorf("providers: %s: %w", pc.ID, err)
		}
		p := &Provider{
			ID:      pc.ID,
			Adapter: a,
			Profile: engine.Profile(pc.Profile),
			BaseURL: strings.TrimRight(pc.BaseURL, "/"),

			EgressBucketed: pc.EgressBucketed,
			Models:         append([]string(nil), pc.Models...),
			models:         map[string]struct{}{},
		}
		if p.Profile == "" {
			p.Profile = engine.ProfileAPIKey
		}
		for _, m := range pc.Models {
			p.models[m] = struct{}{}
		}
		for _, cc := range pc.Connections {
			p.Connections = append(p.Connections, &Connection{
				Provider:     p,
				ID:           cc.ID,
				APIKey:       cc.APIKey.Value(),
				LocalAddress: cc.LocalAddress,
				ProxyURL:     cc.ProxyURL.Value(),
				Ref:          p.ID + "/" + cc.ID,

				LowPriorityMode:  cc.ProviderSpecific.LowPriorityMode,
				AutoLimitReset:   cc.ProviderSpecific.AutoLimitReset,
				OrganizationUUID: cc.ProviderSpecific.OrganizationUUID,
			})
		}
		t.Providers = append(t.Providers, p)
		t.providers[p.ID] = p
	}
	if err := t.addCombos(cfg.Combos); err != nil {
		return nil, err
	}
	return t, nil
}

// WithCombos returns a Topology with t's providers and connections and the
// combos given (validated as part of a configuration) in place of t's. The
// providers and connections are shared, not copied: what an upstream
// reported to a connection (Connection.Reported) holds in both, so a combo
// defined through the API routes by the same headroom as the file's.
func (t *Topology) WithCombos(combos []config.Combo) (*Topology, error) {
	n := &Topology{Providers: t.Providers, providers: t.providers, combos: map[string]*Combo{}}
	if err := n.addCombos(combos); err != nil {
		return nil, err
	}
	return n, nil
}

// addCombos builds every combo of a configuration over t's providers.
func (t *Topology) addCombos(combos []config.Combo) error {
	raw := map[string]config.Combo{}
	for _, c := range combos {
		raw[c.Name] = c
	}
	for _, c := range combos {
		if t.isModel(c.Name) {
			t.Warnings = append(t.Warnings, fmt.Sprintf("combo %q shadows a provider model of the same name; the combo wins", c.Name))
		}
		if _, err := t.buildCombo(c.Name, raw, []string{c.Name}); err != nil {
			return err
		}
	}
	for _, c := range combos {
		t.Combos = append(t.Combos, t.combos[c.Name])
	}
	return nil
}

func (t *Topology) isModel(name string) bool {
	for _, p := range t.Providers {
		if p.Serves(name) {
			return true
		}
	}
	return false
}

// buildCombo builds (once) the combo name and the children it uses,
// rejecting cycles with their path.
func (t *Topology) buildCombo(name string, raw map[string]config.Combo, path []string) (*Combo, error) {
	if c, ok := t.combos[name]; ok {
		return c, nil
	}
	rc := raw[name]
	targets, err := t.flatten(name, raw, path)
	if err != nil {
		return nil, err
	}
	c := &Combo{Name: name, Strategy: rc.Strategy, StickyLimit: rc.StickyLimit, Targets: targets,
		Judge: rc.Judge, Summariser: rc.Summariser, MaxParallel: rc.MaxParallel, AutoWeights: rc.AutoWeights}
	if c.Strategy == "" {
		c.Strategy = "priority"
	}
	t.combos[name] = c
	return c, nil
}

// flatten resolves a combo's targets: a child combo in mode flatten
// (the default) contributes its leaves, one in mode execute becomes one
// target; cycles are rejected.
func (t *Topology) flatten(name string, raw map[string]config.Combo, path []string) ([]ComboTarget, error) {
	var out []ComboTarget
	for i, tg := range raw[name].Targets {
		if child, ok := raw[tg.Model]; ok {
			for _, seen := range path {
				if seen == child.Name {
					return nil, fmt.Errorf("combos: cycle of nested combos: %s", strings.Join(append(path, child.Name), " -> "))
				}
			}
			if child.Mode == "execute" {
				cc, err := t.buildCombo(child.Name, raw, append(path, child.Name))
				if err != nil {
					return nil, err
				}
				out = append(out, ComboTarget{Key: "combo:" + child.Name, Child: cc, Weight: tg.Weight, System: tg.System})
				continue
			}
			leaves, err := t.flatten(child.Name, raw, append(path, child.Name))
			if err != nil {
				return nil, err
			}
			out = append(out, leaves...)
			continue
		}
		pid, model, ok := strings.Cut(tg.Model, "/")
		p := t.providers[pid]
		if !ok || p == nil {
			return nil, fmt.Errorf("combos: %s.targets[%d]: model %q must be provider/model or a combo name", name, i, tg.Model)
		}
		if !p.Serves(model) {
			return nil, fmt.Errorf("combos: %s.targets[%d]: provider %q does not list model %q", name, i, pid, model)
		}
		leaf := ComboTarget{Key: p.ID + "/" + model, Provider: p, Model: model, Weight: tg.Weight,
			PriceIn: tg.PriceIn, PriceOut: tg.PriceOut, ContextWindow: tg.ContextWindow, System: tg.System}
		if tg.Connection != "" {
			for _, c := range p.Connections {
				if c.ID == tg.Connection {
					leaf.Connection = c
				}
			}
			if leaf.Connection == nil {
				return nil, fmt.Errorf("combos: %s.targets[%d]: provider %q has no connection %q", name, i, pid, tg.Connection)
			}
			leaf.Key += "@" + tg.Connection
		}
		out = append(out, leaf)
	}
	return out, nil
}

// Provider returns the provider with the given id.
func (t *Topology) Provider(id string) (*Provider, bool) {
	p, ok := t.providers[id]
	return p, ok
}

// Combo returns the combo with the given name.
func (t *Topology) Combo(name string) (*Combo, bool) {
	c, ok := t.combos[name]
	return c, ok
}

// Resolution is a client model name resolved to candidates.
type Resolution struct {
	// Candidates are shared by every request that resolves the name: read
	// them, never write them (appending copies: their capacity is their
	// length).
	Candidates []Candidate
	// Providers are the distinct providers of Candidates, in order.
	Providers []*Provider
	// Provider is set when the client addressed one provider explicitly
	// ("provider/model").
	Provider *Provider
	// Combo is set when the client addressed a combo.
	Combo *Combo
}

// Resolve maps a client model name to its ordered candidates: a combo name
// to its targets, "provider/model" to that provider's connections, and a
// bare model to every provider listing it, in configuration order. It
// reports false for an unknown model. A name's Resolution is built once
// and shared (see Resolution.Candidates).
func (t *Topology) Resolve(name string) (Resolution, bool) {
	if r, ok := t.resolved.Load(name); ok {
		return r.(Resolution), true
	}
	r, ok := t.resolve(name)
	if !ok {
		return r, false
	}
	r.Candidates = r.Candidates[:len(r.Candidates):len(r.Candidates)]
	for i, cd := range r.Candidates {
		if i == 0 || cd.Provider != r.Candidates[i-1].Provider && !slices.Contains(r.Providers, cd.Provider) {
			r.Providers = append(r.Providers, cd.Provider)
		}
	}
	v, _ := t.resolved.LoadOrStore(name, r)
	return v.(Resolution), true
}

// resolve builds the Resolution of name.
func (t *Topology) resolve(name string) (Resolution, bool) {
	if c, ok := t.combos[name]; ok {
		var out []Candidate
		for i := range c.Targets {
			out = c.AppendCandidates(out, i)
		}
		return Resolution{Candidates: out, Combo: c}, true
	}
	if pid, model, ok := strings.Cut(name, "/"); ok {
		if p, ok := t.providers[pid]; ok {
			if !p.Serves(model) {
				return Resolution{}, false
			}
			return Resolution{Candidates: p.candidates(model), Provider: p}, true
		}
	}
	var out []Candidate
	for _, p := range t.Providers {
		if p.Serves(name) {
			out = append(out, p.candidates(name)...)
		}
	}
	return Resolution{Candidates: out}, len(out) > 0
}

func (p *Provider) candidates(model string) []Candidate {
	out := make([]Candidate, 0, len(p.Connections))
	for _, c := range p.Connections {
		out = append(out, Candidate{Provider: p, Connection: c, Model: model, Target: -1})
	}
	return out
}

// AppendCandidates appends the candidates of target i of c: its pinned
// connection, or every connection of its provider; a child combo's
// targets in configured order.
func (c *Combo) AppendCandidates(out []Candidate, i int) []Candidate {
	tg := &c.Targets[i]
	switch {
	case tg.Child != nil:
		for j := range tg.Child.Targets {
			out = tg.Child.AppendCandidates(out, j)
		}
	case tg.Connection != nil:
		out = append(out, Candidate{Provider: tg.Provider, Connection: tg.Connection, Model: tg.Model, Combo: c, Target: i})
	default:
		for _, conn := range tg.Provider.Connections {
			out = append(out, Candidate{Provider: tg.Provider, Connection: conn, Model: tg.Model, Combo: c, Target: i})
		}
	}
	return out
}

// ModelIDs lists every addressable name: "provider/model" for each model
// of each provider, then each combo name, sorted within each group.
func (t *Topology) ModelIDs() []string {
	var models []string
	for _, p := range t.Providers {
		for _, m := range p.Models {
			models = append(models, p.ID+"/"+m)
		}
	}
	sort.Strings(models)
	var combos []string
	for _, c := range t.Combos {
		combos = append(combos, c.Name)
	}
	sort.Strings(combos)
	return append(models, combos...)
}

// EngineSpecs describes the providers for the engine: profiles, quota
// families, models, and per connection its cooling switch, its max_wait_ms
// override and the digest of its credential (engine.CredentialHash).
func EngineSpecs(cfg *config.Config) []engine.ProviderSpec {
	out := make([]engine.ProviderSpec, 0, len(cfg.Providers))
	for _, pc := range cfg.Providers {
		spec := engine.ProviderSpec{
			ID:             pc.ID,
			Profile:        engine.Profile(pc.Profile),
			QuotaFamilies:  pc.QuotaFamilies,
			EgressBucketed: pc.EgressBucketed,
			Models:         pc.Models,
		}
		if spec.Profile == "" {
			spec.Profile = engine.ProfileAPIKey
		}
		if pc.UseUpstreamRetryHints != nil {
			spec.UseUpstreamRetryHints = *pc.UseUpstreamRetryHints
		} else {
			spec.UseUpstreamRetryHints = spec.Profile == engine.ProfileAPIKey
		}
		for _, cc := range pc.Connections {
			spec.Connections = append(spec.Connections, engine.ConnectionSpec{
				ID:             cc.ID,
				DisableCooling: cc.DisableCooling,
				// The digest of the resolved credential, never the value:
				// the engine starts the connection clean when it changes.
				CredentialHash: engine.CredentialHash(cc.APIKey.Value()),
				MaxWait:        time.Duration(cc.RateLimitOverrides.MaxWaitMS) * time.Millisecond,
			})
		}
		out = append(out, spec)
	}
	return out
}
