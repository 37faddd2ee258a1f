package proxy

import (
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// clientBody returns the request's body as the provider exchanges read
// it: body with its routing fields, parsed once per request for every
// translation (a context-relay summary replaces the body, and with it
// what was parsed).
func (x *state) clientBody(body []byte, parsed wire.Request) *provider.Body {
	if !x.body.Is(body) {
		x.body = provider.NewBody(body, parsed)
	}
	return &x.body
}

// untranslatable answers, after a round, the 400 of a body that some
// candidate's exchange could not translate, when no candidate was tried
// or excluded: every target the request could reach refused the body
// (another kind of candidate, passed the body as is or translated
// otherwise, would have been tried instead). It returns nil otherwise.
func (p *Proxy) untranslatable(x *state) *Result {
	if x.bodyErr == nil || x.attempts > 0 || x.last != nil || len(x.excluded) > 0 {
		return nil
	}
	return p.fail(x, x.bodyErr)
}

// answerLocal answers a request the gateway serves itself for cd (a
// Local exchange: count_tokens estimated for a kind that cannot count).
// It makes no upstream call, so it takes no admission ticket and records
// nothing on the engine; the route headers name the candidate.
func (p *Proxy) answerLocal(x *state, cd topology.Candidate, ex *provider.Exchange, b *provider.Body) *Result {
	out, err := ex.Answer(b)
	if err != nil {
		return p.fail(x, wire.InvalidRequestFor(err, "body"))
	}
	x.final = cd
	res := p.answer(x, 200)
	res.Header = routeHeaders(res.Header, x, cd)
	res.set("Content-Type", "application/json")
	res.set("X-Breakwater-Token-Count", "estimated")
	res.Body = out
	res.Route = x.route()
	return res
}
