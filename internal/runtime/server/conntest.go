package server

import (
	"net/url"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// handleTestConnection serves POST
// /api/providers/:provider/connections/:connection/test {model?}: one
// small real request to the connection's upstream with its credential, on
// model (default: the provider's first model), bypassing routing, the
// breaker, cooldowns and admission (proxy.TestConnection). It answers 200
// with {ok, status, latency_ms, model, breaker_before, breaker_after} when
// the test passed (a DEGRADED breaker is then CLOSED), and 200 with {ok:
// false, status, latency_ms, model, reason, message} when it failed (a
// failed test records nothing). An unknown provider or connection is a
// 404 naming it; a bad body or a model the provider does not list, a 400
// naming the field. Identifiers come percent-encoded in the path (the
// console encodes them; a malformed escape is a 400 naming the
// parameter). It logs one line per test; the answer and the log
// never carry the credential.
func (s *Server) handleTestConnection(c *fiber.Ctx) error {
	var req struct {
		Model string `json:"model"`
	}
	if e := decodeJSON(c, &req); e != nil {
		return s.adminError(c, e)
	}
	pid, e := pathParam(c, "provider")
	if e != nil {
		return s.adminError(c, e)
	}
	cid, e := pathParam(c, "connection")
	if e != nil {
		return s.adminError(c, e)
	}
	p, ok := s.view.Load().routing.Topology.Provider(pid)
	if !ok {
		return s.adminError(c, notFound("provider", "unknown provider "+quote(pid)))
	}
	i := slices.IndexFunc(p.Connections, func(cn *topology.Connection) bool { return cn.ID == cid })
	if i < 0 {
		return s.adminError(c, notFound("connection", "provider "+quote(pid)+" has no connection "+quote(cid)))
	}
	switch {
	case req.Model == "" && len(p.Models) == 0:
		return s.adminError(c, badRequest("model", "is required: provider "+quote(pid)+" lists no model"))
	case req.Model == "":
		req.Model = p.Models[0]
	case !p.Serves(req.Model):
		return s.adminError(c, badRequest("model", "provider "+quote(pid)+" does not list model "+quote(req.Model)))
	}
	res, err := s.proxy.TestConnection(s.baseCtx, p.Connections[i], req.Model)
	s.log.Info("connection test", "provider", pid, "connection", cid, "model", req.Model,
		"ok", res.OK, "status", res.Status, "reason", res.Reason, "latency_ms", res.LatencyMS)
	if err != nil {
		return s.engineError(c, err)
	}
	return c.JSON(res)
}

// pathParam returns the route parameter name of c, percent-decoded, as a
// string of its own (Fiber reuses the request buffer after the handler);
// a malformed escape is a 400 naming the parameter.
func pathParam(c *fiber.Ctx, name string) (string, *wire.APIError) {
	v, err := url.PathUnescape(c.Params(name))
	if err != nil {
		return "", badRequest(name, "malformed percent-encoding in the path: "+quote(c.Params(name)))
	}
	return strings.Clone(v), nil
}
