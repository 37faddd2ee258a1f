package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// clientKey is a configured client API key, kept only as its SHA-256.
type clientKey struct {
	id     string
	hash   [32]byte
	scopes []string
	allow  []string
}

// authenticator checks client keys and the admin token in constant time.
type authenticator struct {
	keys      []clientKey
	admin     [32]byte
	adminSet  bool
	keysExist bool
}

func newAuthenticator(cfg *config.Config) *authenticator {
	a := &authenticator{}
	for _, k := range cfg.Keys {
		a.keys = append(a.keys, clientKey{id: k.ID, hash: sha256.Sum256([]byte(k.Key.Value())), scopes: k.Scopes, allow: k.AllowedConnections})
	}
	a.keysExist = len(a.keys) > 0
	if t := cfg.Server.AdminToken.Value(); t != "" {
		a.admin = sha256.Sum256([]byte(t))
		a.adminSet = true
	}
	return a
}

// lookup returns the key whose secret is presented, comparing against
// every configured key so the time taken does not depend on which matched.
func (a *authenticator) lookup(presented string) *clientKey {
	h := sha256.Sum256([]byte(presented))
	var found *clientKey
	for i := range a.keys {
		if subtle.ConstantTimeCompare(h[:], a.keys[i].hash[:]) == 1 {
			found = &a.keys[i]
		}
	}
	return found
}

// checkAdmin reports whether presented is the admin token.
func (a *authenticator) checkAdmin(presented string) bool {
	if !a.adminSet || presented == "" {
		return false
	}
	h := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(h[:], a.admin[:]) == 1
}

// presentedKey reads "Authorization: Bearer K" or "x-api-key: K".
func presentedKey(h *fasthttp.RequestHeader) string {
	if v := reqHeader(h, fiber.HeaderAuthorization); v != "" {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			return strings.TrimSpace(v[7:])
		}
		return ""
	}
	return reqHeader(h, "x-api-key")
}

const localsKey = "bw.key"

// clientAuth enforces client keys on the client API routes Fiber serves.
func (s *Server) clientAuth(c *fiber.Ctx) error {
	if !s.authClient(c.Context(), formatOf(c)) {
		return nil
	}
	return c.Next()
}

// authClient enforces client keys on a client API request, answering a
// refused one itself (in format f) and reporting false; an accepted key
// is left in the request's user values (localsKey). With no key
// configured the gateway is open (the listener is loopback-only then; the
// configuration refuses anything else) and loopbackOnly guards it.
func (s *Server) authClient(ctx *fasthttp.RequestCtx, f wire.Format) bool {
	if !s.auth.keysExist {
		if e := s.loopbackOnly(ctx); e != nil {
			writeErrorTo(ctx, e, f)
			return false
		}
		return true
	}
	presented := presentedKey(&ctx.Request.Header)
	k := s.auth.lookup(presented)
	if k == nil {
		s.auditRefusal(ctx, "client", refusalReason(presented, "key"))
		writeErrorTo(ctx, &wire.APIError{Status: 401, Type: "authentication_error", Code: "invalid_api_key",
			Message: "missing or invalid API key (send Authorization: Bearer KEY or x-api-key: KEY)"}, f)
		return false
	}
	ctx.SetUserValue(localsKey, k)
	return true
}

// adminAuth enforces the admin token on the admin API.
func (s *Server) adminAuth(c *fiber.Ctx) error {
	tok := ""
	if v := c.Get(fiber.HeaderAuthorization); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		tok = strings.TrimSpace(v[7:])
	}
	if !s.auth.checkAdmin(tok) {
		msg := "admin API requires Authorization: Bearer <admin token>"
		reason := refusalReason(tok, "token")
		if !s.auth.adminSet {
			msg, reason = "admin API is disabled: set server.admin_token", "admin API disabled"
		}
		s.auditRefusal(c.Context(), "admin", reason)
		return s.writeError(c, &wire.APIError{Status: 401, Type: "authentication_error", Code: "unauthorized", Message: msg}, wire.FormatChat)
	}
	return c.Next()
}

// auditRefusal writes the audit line of a refused authentication: who
// (the client's address), where (method and path) and why — never the key
// or token presented, and the key id as "unknown".
func (s *Server) auditRefusal(ctx *fasthttp.RequestCtx, realm, reason string) {
	s.audit.Warn("authentication refused", "realm", realm, "client_ip", ctx.RemoteIP().String(), "method", string(ctx.Method()),
		"path", wire.Clip(string(ctx.URI().PathOriginal())), "key_id", "unknown", "reason", reason)
}

// refusalReason says whether a credential was missing or wrong.
func refusalReason(presented, what string) string {
	if presented == "" {
		return "missing " + what
	}
	return "unknown " + what
}
