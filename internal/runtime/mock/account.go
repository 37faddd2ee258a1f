package mock

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// The Claude account endpoints of the usage wall (docs/resilience.md §2b): the
// usage probe and the session-limit reset claim.
const (
	usagePath     = "/api/oauth/usage"
	orgPrefix     = "/api/organizations/"
	resetSuffix   = "/reset_rate_limits"
	resetProgram  = "juniper_tide"
	maxClaimBytes = 64 << 10
)

// DefaultOrganizationID is the organization the usage probe names in its
// anthropic-organization-id header unless a step says otherwise
// (Step.OrganizationID).
const DefaultOrganizationID = "0b7e5d9c-3f1a-4c2e-9d8b-6a4f2e1c7b30"

// organizationHeader names the organization of the credential in every
// answer of Anthropic's API.
const organizationHeader = "anthropic-organization-id"

// bearer reports whether a request authenticates with Authorization:
// Bearer, as the account endpoints require (an OAuth access token).
func bearer(r *http.Request) bool {
	a := r.Header.Get("Authorization")
	return len(a) > 7 && strings.EqualFold(a[:7], "bearer ") && strings.TrimSpace(a[7:]) != ""
}

// refuseWithoutBearer answers 401 authentication_error to an account call
// that does not authenticate with a bearer token (an x-api-key, or
// nothing); the call uses no script step and is not counted.
func (s *Server) refuseWithoutBearer(w http.ResponseWriter, r *http.Request) bool {
	if bearer(r) {
		return false
	}
	c := &call{s: s, w: w, wire: wireAnthropic, model: defaultModel}
	c.writeError(http.StatusUnauthorized, "this endpoint requires an OAuth access token (Authorization: Bearer)")
	return true
}

// resetOrg returns the organization of a reset claim path.
func resetOrg(path string) (string, bool) {
	if !strings.HasPrefix(path, orgPrefix) || !strings.HasSuffix(path, resetSuffix) ||
		len(path) <= len(orgPrefix)+len(resetSuffix) {
		return "", false
	}
	org := path[len(orgPrefix) : len(path)-len(resetSuffix)]
	return org, !strings.Contains(org, "/")
}

// usageProbe serves GET /api/oauth/usage, for a bearer token only; the
// answer names the organization in its anthropic-organization-id header.
func (s *Server) usageProbe(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) || s.refuseWithoutBearer(w, r) {
		return
	}
	s.stats.Load().usageProbes.Add(1)
	st := s.prog.Load().pick(apiKey(r), "", r.URL.Path, r.Header, true)
	org := DefaultOrganizationID
	if st.OrganizationID != nil {
		org = *st.OrganizationID
	}
	if org != "" {
		w.Header().Set(organizationHeader, org)
	}
	s.accountAnswer(w, r, st, func(b []byte) []byte { return appendUsage(b, st.JuniperTide) })
}

// resetClaim serves POST /api/organizations/{org}/reset_rate_limits, for a
// bearer token only. The body must be {"program":"juniper_tide"}; anything
// else is a 400 that uses no script step and is not counted.
func (s *Server) resetClaim(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodPost) || s.refuseWithoutBearer(w, r) {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxClaimBytes))
	var req struct {
		Program string `json:"program"`
	}
	if err != nil || json.Unmarshal(body, &req) != nil || req.Program != resetProgram {
		c := &call{s: s, w: w, wire: wireAnthropic, model: defaultModel}
		c.writeError(http.StatusBadRequest, `program: must be "`+resetProgram+`"`)
		return
	}
	s.stats.Load().resetClaims.Add(1)
	st := s.prog.Load().pick(apiKey(r), "", r.URL.Path, r.Header, true)
	s.accountAnswer(w, r, st, func(b []byte) []byte { return appendResetResult(b, st) })
}

// accountAnswer sends a step's answer to an account call: latency, reset,
// status and headers apply; a raw body or, for status >= 400, an Anthropic
// error JSON replaces the generated JSON.
func (s *Server) accountAnswer(w http.ResponseWriter, r *http.Request, st *Step, gen func([]byte) []byte) {
	c := &call{s: s, w: w, rc: http.NewResponseController(w), ctx: r.Context(),
		wire: wireAnthropic, step: st, model: defaultModel}
	if d := st.latency(); d > 0 && !c.pause(d) {
		return
	}
	if st.Reset {
		c.resetConn()
		return
	}
	defer c.endGzip()
	status := st.status()
	switch {
	case st.Body != "":
		c.writeBody(status, sniffContentType(st.Body), []byte(st.Body))
	case status >= 400:
		c.writeError(status, "")
	default:
		c.writeBody(status, "application/json", gen(nil))
	}
}

// appendUsage appends the usage probe JSON with the juniper_tide block
// (nil: a reset that is available now).
func appendUsage(b []byte, jt *JuniperTide) []byte {
	if jt == nil {
		jt = &JuniperTide{Arm: "reset", Available: true}
	}
	b = append(b, `{"juniper_tide":{"arm":`...)
	b = appendJSONString(b, jt.Arm)
	b = append(b, `,"available":`...)
	b = strconv.AppendBool(b, jt.Available)
	b = append(b, `,"next_available_at":`...)
	b = appendTimeValue(b, jt.NextAvailableAt)
	return append(b, "}}\n"...)
}

// appendResetResult appends the reset claim JSON {"result": ...,
// "next_available_at"?: ...}.
func appendResetResult(b []byte, st *Step) []byte {
	res := st.Result
	if res == "" {
		res = "reset"
	}
	b = append(b, `{"result":`...)
	b = appendJSONString(b, res)
	if st.NextAvailableAt != "" {
		b = append(b, `,"next_available_at":`...)
		b = appendTimeValue(b, st.NextAvailableAt)
	}
	return append(b, "}\n"...)
}

// appendTimeValue appends v as null (empty), a number (digits) or a string.
func appendTimeValue(b []byte, v string) []byte {
	if v == "" {
		return append(b, "null"...)
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil && strings.Trim(v, "0123456789.") == "" {
		return append(b, v...)
	}
	return appendJSONString(b, v)
}
