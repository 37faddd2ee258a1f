package proxy

import "github.com/breakwater-dev/breakwater/internal/runtime/topology"

// toolLimitOrder moves the candidates whose provider+model learned a
// tool-count limit below the request's tool count (Engine.ToolLimit,
// docs/resilience.md §14) after the others, keeping the order within each
// group. They are not excluded: when nothing else answers they are still
// tried. A request without tools, or whose candidates have no learned
// limit, keeps its order and allocates nothing.
func (p *Proxy) toolLimitOrder(x *state, cands []topology.Candidate) []topology.Candidate {
	if x.tools == 0 {
		return cands
	}
	over := func(cd topology.Candidate) bool {
		limit, ok := p.eng.ToolLimit(cd.Provider.ID, cd.Model)
		return ok && limit < x.tools
	}
	first := -1
	for i, cd := range cands {
		if over(cd) {
			first = i
			break
		}
	}
	if first < 0 {
		return cands
	}
	out := make([]topology.Candidate, 0, len(cands))
	out = append(out, cands[:first]...)
	var later []topology.Candidate
	for _, cd := range cands[first:] {
		if over(cd) {
			later = append(later, cd)
		} else {
			out = append(out, cd)
		}
	}
	return append(out, later...)
}
