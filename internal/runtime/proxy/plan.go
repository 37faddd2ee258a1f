package proxy

import (
	"context"
	"hash/fnv"
	"net/http"
	"slices"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Routing is an immutable routing view: the topology and the strategy of
// each of its combos. Requests keep the view they started with.
type Routing struct {
	Topology *topology.Topology
	routes   map[*topology.Combo]*comboRoute
	// plainHeaders are the upstream headers of each connection's
	// requests that forward no client header and carry no plugin header,
	// built once for a non-streaming ([0]) and a streaming ([1]) request
	// (plainHeadersOf): they are shared and never modified.
	plainHeaders map[*topology.Connection]*[2]http.Header
	// plainURLs are the upstream URLs of each provider's endpoints with
	// no client query parameter (upstreamURL), built once.
	plainURLs map[plainURL]string
	// plainTargets are the buffered calls of each connection's endpoints
	// with plain headers and URL (bufferedTarget), kept to be laid out
	// once.
	plainTargets map[plainTarget]upstream.Target
}

// plainTarget names a connection's endpoint for a client format.
type plainTarget struct {
	connection *topology.Connection
	format     wire.Format
}

// plainURL names a provider's endpoint for a client format.
type plainURL struct {
	provider *topology.Provider
	format   wire.Format
}

// comboRoute is a combo with its routing strategy, built once.
type comboRoute struct {
	combo   *topology.Combo
	strat   strategy.Strategy
	targets []strategy.Target
	// label describes the route in the request log: "combo NAME (STRATEGY)".
	label string
}

// Routing returns the current routing view.
func (p *Proxy) Routing() *Routing { return p.routing.Load() }

// SetRouting installs a routing view for the requests that start from now
// on (the combos admin API swaps it).
func (p *Proxy) SetRouting(r *Routing) { p.routing.Store(r) }

// NewRouting builds the routing view of topo: the strategy of every combo;
// an unknown strategy name falls back to priority with a warning. The
// strategies share the proxy's signals and persisted positions.
func (p *Proxy) NewRouting(topo *topology.Topology) *Routing {
	routes := make(map[*topology.Combo]*comboRoute, len(topo.Combos))
	candidateState := p.candidateStateOf(topo)
	var add func(c *topology.Combo)
	add = func(c *topology.Combo) {
		if _, ok := routes[c]; ok {
			return
		}
		w := strategy.DefaultAutoWeights()
		for k, v := range c.AutoWeights {
			switch k {
			case "health":
				w.Health = v
			case "latency":
				w.Latency = v
			case "cost":
				w.Cost = v
			case "headroom":
				w.Headroom = v
			case "context":
				w.Context = v
			}
		}
		st, known := strategy.New(c.Strategy, strategy.Options{StickyLimit: c.StickyLimit, Signals: p.signals, State: p.stratState, AutoWeights: w, Clock: p.clock,
			Route: p.route, CandidateState: candidateState})
		if !known {
			p.log.Warn("unknown combo strategy: routing by priority", "combo", c.Name, "strategy", c.Strategy)
		}
		r := &comboRoute{combo: c, strat: st, label: "combo " + c.Name + " (" + st.Name() + ")"}
		for _, tg := range c.Targets {
			t := strategy.Target{Key: tg.Key, Model: tg.Model, Weight: tg.Weight, PriceIn: tg.PriceIn, PriceOut: tg.PriceOut, ContextWindow: tg.ContextWindow}
			if tg.Provider != nil {
				t.Provider = tg.Provider.ID
			}
			if tg.Connection != nil {
				t.Connection = tg.Connection.ID
			}
			r.targets = append(r.targets, t)
		}
		routes[c] = r
		for _, tg := range c.Targets {
			if tg.Child != nil {
				add(tg.Child)
			}
		}
	}
	for _, c := range topo.Combos {
		add(c)
	}
	plain := make(map[*topology.Connection]*[2]http.Header)
	urls := make(map[plainURL]string)
	targets := make(map[plainTarget]upstream.Target)
	for _, pv := range topo.Providers {
		for _, cn := range pv.Connections {
			plain[cn] = &[2]http.Header{p.buildUpstreamHeaders(pv, cn, false, nil, nil), p.buildUpstreamHeaders(pv, cn, true, nil, nil)}
		}
		for f := range wire.NumFormats {
			if ex := pv.Adapter.Exchange(f); ex != nil {
				u := ex.URL(pv.BaseURL, nil)
				urls[plainURL{pv, f}] = u
				for _, cn := range pv.Connections {
					targets[plainTarget{cn, f}] = upstream.NewTarget(http.MethodPost, u, plain[cn][0])
				}
			}
		}
	}
	return &Routing{Topology: topo, routes: routes, plainHeaders: plain, plainURLs: urls, plainTargets: targets}
}

// servableOf is servable for a resolution: its candidates themselves (no
// copy, whatever their number) when each of its providers serves f.
func servableOf(res topology.Resolution, f wire.Format) []topology.Candidate {
	for _, p := range res.Providers {
		if p.Adapter.Exchange(f) == nil {
			return servable(res.Candidates, f)
		}
	}
	return res.Candidates
}

// servable keeps the candidates whose provider kind serves the client's
// format (docs/compatibility.md: embeddings and legacy completions reach
// OpenAI-kind providers only).
func servable(cands []topology.Candidate, f wire.Format) []topology.Candidate {
	for i, cd := range cands {
		if cd.Provider.Adapter.Exchange(f) == nil {
			kept := append(make([]topology.Candidate, 0, len(cands)), cands[:i]...)
			for _, cd := range cands[i+1:] {
				if cd.Provider.Adapter.Exchange(f) != nil {
					kept = append(kept, cd)
				}
			}
			return kept
		}
	}
	return cands
}

// strategyRequest describes a request to the strategies: prompt size
// estimate, prompt-prefix hash (cache affinity) and session.
func strategyRequest(combo string, body []byte, session string, now time.Time) strategy.Request {
	h := fnv.New64a()
	prefix := body
	if len(prefix) > 2048 {
		prefix = prefix[:2048]
	}
	_, _ = h.Write(prefix)
	return strategy.Request{Combo: combo, Now: now, PromptTokens: len(body) / 4, PrefixHash: h.Sum64(), Session: session}
}

// planCombo orders a combo's candidates with its strategy: eligible
// targets in strategy order, then the excluded ones (so their exclusions
// are reported) but never those a routing plugin excluded, a child combo
// in mode execute expanded in place with its own strategy. The auto
// strategy's explanation becomes the X-Breakwater-Auto-Factors header.
func (p *Proxy) planCombo(ctx context.Context, x *state, r *comboRoute, body []byte) []topology.Candidate {
	sreq := strategyRequest(r.combo.Name, body, x.req.Session, p.clock.Now())
	if x.sreq == nil {
		x.sreq = map[*topology.Combo]strategy.Request{}
	}
	x.sreq[r.combo] = sreq
	eligible := func(i int) bool {
		tg := &r.combo.Targets[i]
		switch {
		case tg.Child != nil:
			return true
		case tg.Connection != nil:
			_, ex := p.eng.Peek(tg.Provider.ID, tg.Connection.ID, tg.Model)
			return !ex
		}
		for _, conn := range tg.Provider.Connections {
			if _, ex := p.eng.Peek(tg.Provider.ID, conn.ID, tg.Model); !ex {
				return true
			}
		}
		return false
	}
	var order []int
	var dropped []bool // targets a routing plugin excluded
	switch st := r.strat.(type) {
	case *strategy.Auto:
		var f strategy.Factors
		order, f = st.OrderExplain(sreq, r.targets, eligible)
		if s := f.String(); s != "" {
			x.header = append(x.header, wire.Header{Name: strategy.AutoFactorsHeader, Value: s})
		}
	case *strategy.Plugin:
		order, dropped = p.routeByPlugin(ctx, x, r, st, sreq, eligible)
	default:
		order = r.strat.Order(sreq, r.targets, eligible)
	}
	var out []topology.Candidate
	seen := make([]bool, len(r.targets))
	add := func(i int) {
		if tg := &r.combo.Targets[i]; tg.Child != nil {
			out = append(out, p.planCombo(ctx, x, x.rt.routes[tg.Child], body)...)
			return
		}
		out = r.combo.AppendCandidates(out, i)
	}
	for _, i := range order {
		seen[i] = true
		add(i)
	}
	for i := range r.targets {
		if !seen[i] && (dropped == nil || !dropped[i]) {
			add(i)
		}
	}
	return out
}

// comboStart begins the signals of an attempt on a combo candidate.
func (p *Proxy) comboStart(x *state, cd topology.Candidate) {
	if cd.Combo == nil {
		return
	}
	r := x.rt.routes[cd.Combo]
	x.sig = p.signals.Start(r.targets[cd.Target].Key)
	x.sigOn = true
}

// comboOutcome reports how an attempt on a combo candidate ended to the
// signals and the combo's strategy (sticky batches, round-robin,
// fill-first, last known good).
func (p *Proxy) comboOutcome(x *state, cd topology.Candidate, success bool) {
	if cd.Combo == nil {
		return
	}
	if x.sigOn {
		x.sig.Done(success)
		x.sigOn = false
	}
	r := x.rt.routes[cd.Combo]
	r.strat.Report(x.sreq[cd.Combo], r.targets, cd.Target, success)
}

// order orders the candidates for dispatch: the quota-share selection
// among each target's connections first (shareOrder), the others by
// reported headroom (headroomOrder), then the session's
// claims above it: a leased request keeps only its key's allowed
// connections, its bound connection first; an affinity session moves its
// pinned connection first.
func (p *Proxy) order(ctx context.Context, x *state, cands []topology.Candidate) []topology.Candidate {
	cands = p.headroomOrder(p.shareOrder(cands))
	if x.lease != nil {
		kept := make([]topology.Candidate, 0, len(cands))
		for _, cd := range cands {
			if x.lease.allows(cd) {
				kept = append(kept, cd)
			}
		}
		cands = kept
		cands = moveFirst(cands, x.lease.lease.Connection)
	}
	if ttl := p.eng.CurrentSettings().SessionAffinityTTLMS; ttl > 0 && x.req.Session != "" {
		if ref, ok := p.pins.Get(ctx, x.req.Session); ok {
			x.pinned = ref
			if x.lease == nil {
				cands = moveFirst(cands, ref)
			}
		}
	}
	return cands
}

// moveFirst moves the candidates on connection ref to the front, keeping
// the order of the others. cands is not modified (it may be a shared
// resolution): a reordered copy is returned when anything moved.
func moveFirst(cands []topology.Candidate, ref string) []topology.Candidate {
	if ref == "" {
		return cands
	}
	var out []topology.Candidate
	n := 0
	for i := range cands {
		if cands[i].Connection.Ref != ref {
			continue
		}
		if i != n {
			if out == nil {
				out = slices.Clone(cands)
			}
			cd := out[i]
			copy(out[n+1:i+1], out[n:i])
			out[n] = cd
		}
		n++
	}
	if out == nil {
		return cands
	}
	return out
}

// affinityFailed unpins the session from a connection that failed, cooled
// or was excluded, so the session re-pins to a healthy one.
func (p *Proxy) affinityFailed(ctx context.Context, x *state, cd topology.Candidate) {
	if x.req.Session != "" && x.pinned == cd.Connection.Ref {
		if err := p.pins.UnpinIf(context.WithoutCancel(ctx), x.req.Session, cd.Connection.Ref); err != nil {
			p.log.Warn("unpinning an affinity session", "error", err)
		}
		x.pinned = ""
	}
}

// affinitySucceeded pins the session to the connection that answered.
func (p *Proxy) affinitySucceeded(ctx context.Context, x *state, cd topology.Candidate) {
	if x.req.Session == "" {
		return
	}
	ttl := time.Duration(p.eng.CurrentSettings().SessionAffinityTTLMS) * time.Millisecond
	if err := p.pins.Pin(context.WithoutCancel(ctx), x.req.Session, cd.Connection.Ref, ttl); err != nil {
		p.log.Warn("pinning an affinity session", "error", err)
	}
}

// shareOrder applies the quota-share target selection (docs/resilience.md
// §5) to each run of candidates that is one target over several
// connections (the same combo target, provider and model): when those
// connections share accounts under quota-share (a max_concurrent), the
// run is reordered by admission.Manager.OrderQuotaShare — deficit round
// robin plus the power of two choices on free slots, a full connection
// last but never dropped. Other runs keep their order. cands is not
// modified; a reordered copy is returned when anything moved.
func (p *Proxy) shareOrder(cands []topology.Candidate) []topology.Candidate {
	if !p.adm.AnyQuotaShared() {
		return cands // nothing to reorder, whatever the number of candidates
	}
	return reorderRuns(cands, func(run []topology.Candidate) []int {
		if !p.anyShared(run) {
			return nil
		}
		ids := make([]string, len(run))
		for k := range ids {
			ids[k] = run[k].Connection.ID
		}
		return p.adm.OrderQuotaShare(run[0].Provider.ID, ids)
	})
}

// reorderRuns applies order to each run of cands that is one target over
// several connections (sameTarget): order returns the run's new order, as
// indices into the run, or nil to keep it. cands is not modified; a
// reordered copy is returned when anything moved.
func reorderRuns(cands []topology.Candidate, order func(run []topology.Candidate) []int) []topology.Candidate {
	var out []topology.Candidate
	for i := 0; i < len(cands); {
		j := i + 1
		for j < len(cands) && sameTarget(cands[i], cands[j]) {
			j++
		}
		if j-i > 1 {
			if idx := order(cands[i:j]); idx != nil {
				if out == nil {
					out = slices.Clone(cands)
				}
				for k, o := range idx {
					out[i+k] = cands[i+o]
				}
			}
		}
		i = j
	}
	if out == nil {
		return cands
	}
	return out
}

// anyShared reports whether one of cands' connections is under
// quota-share.
func (p *Proxy) anyShared(cands []topology.Candidate) bool {
	if !p.adm.AnyQuotaShared() {
		return false // one counter, whatever the number of candidates
	}
	for _, cd := range cands {
		if p.adm.QuotaShared(cd.Provider.ID, cd.Connection.ID) {
			return true
		}
	}
	return false
}

// sameTarget reports whether two candidates are the same target on two
// connections.
func sameTarget(a, b topology.Candidate) bool {
	return a.Combo == b.Combo && a.Target == b.Target && a.Provider == b.Provider && a.Model == b.Model
}
