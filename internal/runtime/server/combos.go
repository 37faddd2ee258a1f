package server

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
)

// comboRoute is a combo with its routing strategy, built once.
type comboRoute struct {
	combo   *topology.Combo
	strat   strategy.Strategy
	targets []strategy.Target
}

// buildRoutes builds the strategy of every combo of topo; an unknown
// strategy name falls back to priority with a warning.
func (s *Server) buildRoutes(topo *topology.Topology) map[*topology.Combo]*comboRoute {
	routes := make(map[*topology.Combo]*comboRoute, len(topo.Combos))
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
		st, known := strategy.New(c.Strategy, strategy.Options{StickyLimit: c.StickyLimit, Signals: s.signals, State: s.stratState, AutoWeights: w, Clock: s.clock})
		if !known {
			s.log.Warn("unknown combo strategy: routing by priority", "combo", c.Name, "strategy", c.Strategy)
		}
		r := &comboRoute{combo: c, strat: st}
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
	return routes
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
// are reported), a child combo in mode execute expanded in place with its
// own strategy.
func (s *Server) planCombo(x *exchange, r *comboRoute, body []byte) []topology.Candidate {
	sreq := strategyRequest(r.combo.Name, body, x.session, s.clock.Now())
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
			_, ex := s.eng.Peek(tg.Provider.ID, tg.Connection.ID, tg.Model)
			return !ex
		}
		for _, conn := range tg.Provider.Connections {
			if _, ex := s.eng.Peek(tg.Provider.ID, conn.ID, tg.Model); !ex {
				return true
			}
		}
		return false
	}
	var order []int
	if auto, ok := r.strat.(*strategy.Auto); ok {
		var f strategy.Factors
		order, f = auto.OrderExplain(sreq, r.targets, eligible)
		x.autoFactors = f.String()
	} else {
		order = r.strat.Order(sreq, r.targets, eligible)
	}
	var out []topology.Candidate
	seen := make([]bool, len(r.targets))
	add := func(i int) {
		if tg := &r.combo.Targets[i]; tg.Child != nil {
			out = append(out, s.planCombo(x, x.rt.routes[tg.Child], body)...)
			return
		}
		out = r.combo.AppendCandidates(out, i)
	}
	for _, i := range order {
		seen[i] = true
		add(i)
	}
	for i := range r.targets {
		if !seen[i] {
			add(i)
		}
	}
	return out
}

// comboStart begins the signals of an attempt on a combo candidate.
func (s *Server) comboStart(x *exchange, cd topology.Candidate) {
	if cd.Combo == nil {
		return
	}
	r := x.rt.routes[cd.Combo]
	x.sig = s.signals.Start(r.targets[cd.Target].Key)
	x.sigOn = true
}

// comboOutcome reports how an attempt on a combo candidate ended to the
// signals and the combo's strategy (sticky batches, round-robin,
// fill-first, last known good).
func (s *Server) comboOutcome(x *exchange, cd topology.Candidate, success bool) {
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

// observeQuota feeds upstream x-ratelimit-* headers of a combo candidate
// to the quota-aware strategies.
func (s *Server) observeQuota(x *exchange, cd topology.Candidate, h map[string]string) {
	if cd.Combo == nil || len(h) == 0 {
		return
	}
	if q, ok := strategy.ParseQuotaHeaders(h, s.clock.Now()); ok {
		s.signals.ObserveQuota(x.rt.routes[cd.Combo].targets[cd.Target].Key, q)
	}
}

// flushStrategyState persists round-robin and sticky positions every
// second until ctx ends, and once more at the end.
func (s *Server) flushStrategyState(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := s.stratState.Flush(context.Background()); err != nil {
				s.log.Warn("saving strategy positions", "error", err)
			}
			return
		case <-t.C:
			if err := s.stratState.Flush(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("saving strategy positions", "error", err)
			}
		}
	}
}
