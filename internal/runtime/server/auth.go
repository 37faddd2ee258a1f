package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/gofiber/fiber/v2"

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
func presentedKey(c *fiber.Ctx) string {
	if v := c.Get(fiber.HeaderAuthorization); v != "" {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			return strings.TrimSpace(v[7:])
		}
		return ""
	}
	return c.Get("x-api-key")
}

const localsKey = "bw.key"

// clientAuth enforces client keys on the client API. With no key
// configured the gateway is open (the listener is loopback-only then; the
// configuration refuses anything else).
func (s *Server) clientAuth(c *fiber.Ctx) error {
	if !s.auth.keysExist {
		if e := s.loopbackOnly(c); e != nil {
			return s.writeError(c, e, formatOf(c))
		}
		return c.Next()
	}
	presented := presentedKey(c)
	k := s.auth.lookup(presented)
	if k == nil {
		s.auditRefusal(c, "client", refusalReason(presented, "key"))
		return s.writeError(c, &wire.APIError{Status: 401, Type: "authentication_error", Code: "invalid_api_key",
			Message: "missing or invalid API key (send Authorization: Bearer KEY or x-api-key: KEY)"}, formatOf(c))
	}
	c.Locals(localsKey, k)
	return c.Next()
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
		s.auditRefusal(c, "admin", reason)
		return s.writeError(c, &wire.APIError{Status: 401, Type: "authentication_error", Code: "unauthorized", Message: msg}, wire.FormatChat)
	}
	return c.Next()
}

// auditRefusal writes the audit line of a refused authentication: who
// (the client's address), where (method and path) and why — never the key
// or token presented, and the key id as "unknown".
func (s *Server) auditRefusal(c *fiber.Ctx, realm, reason string) {
	s.audit.Warn("authentication refused", "realm", realm, "client_ip", c.IP(), "method", c.Method(),
		"path", wire.Clip(c.Path()), "key_id", "unknown", "reason", reason)
}

// refusalReason says whether a credential was missing or wrong.
func refusalReason(presented, what string) string {
	if presented == "" {
		return "missing " + what
	}
	return "unknown " + what
}
