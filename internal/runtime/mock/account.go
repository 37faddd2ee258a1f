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

// resetOrg returns the organization of a reset claim path.
func resetOrg(path string) (string, bool) {
	if !strings.HasPrefix(path, orgPrefix) || !strings.HasSuffix(path, resetSuffix) ||
		len(path) <= len(orgPrefix)+len(resetSuffix) {
		return "", false
	}
	org := path[len(orgPrefix) : len(path)-len(resetSuffix)]
	return org, !strings.Contains(org, "/")
}

// usageProbe serves GET /api/oauth/usage.
func (s *Server) usageProbe(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	s.stats.Load().usageProbes.Add(1)
	st := s.prog.Load().pick(apiKey(r), "", r.URL.Path, r.Header, true)
	s.accountAnswer(w, r, st, func(b []byte) []byte { return appendUsage(b, st.JuniperTide) })
}

// resetClaim serves POST /api/organizations/{org}/reset_rate_limits. The
// body must be {"program":"juniper_tide"}; anything else is a 400 that
// uses no script step and is not counted.
func (s *Server) resetClaim(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodPost) {
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
