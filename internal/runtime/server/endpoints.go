package server

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// The endpoints beside the three chat formats. Each one goes through the
// request loop like chat — model resolution, failover, admission,
// breakers — and the provider adapter decides per kind how it is served
// (docs/compatibility.md): count_tokens is forwarded to Anthropic-kind
// providers and estimated by the gateway for others; embeddings and
// legacy completions reach OpenAI-kind providers only.

func (s *Server) handleCountTokens(c *fiber.Ctx) error {
	return s.serveRoute(c, wire.FormatCountTokens)
}

func (s *Server) handleEmbeddings(c *fiber.Ctx) error {
	return s.serveRoute(c, wire.FormatEmbeddings)
}

func (s *Server) handleCompletions(c *fiber.Ctx) error {
	return s.serveRoute(c, wire.FormatCompletions)
}

// forwardQuery returns the client query parameters some endpoint passes on
// (provider.ForwardableQuery, e.g. ?beta=true of the Anthropic SDKs' beta
// clients); the rest of the query string is not sent upstream.
func forwardQuery(ctx *fasthttp.RequestCtx) []wire.Header {
	if _, plain := plainPath(&ctx.Request.Header); plain {
		return nil // no query at all
	}
	var out []wire.Header
	for _, name := range provider.ForwardableQuery() {
		if v := utils.UnsafeString(ctx.QueryArgs().Peek(name)); v != "" {
			out = append(out, wire.Header{Name: name, Value: strings.Clone(v)})
		}
	}
	return out
}
