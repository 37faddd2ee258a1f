package usagewall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ResetProgram is the usage block and the program of the session-limit reset.
const ResetProgram = "juniper_tide"

// ArmReset is the arm of the juniper_tide block that offers a reset.
const ArmReset = "reset"

// maxReportedBody bounds how much of an unexpected body an error quotes.
const maxReportedBody = 200

// UsageProbePath returns the path (with query) of the usage probe, relative
// to the connection's base URL: GET {base}/api/oauth/usage?at_wall=1&skip_spend=1.
func UsageProbePath() string { return "/api/oauth/usage?at_wall=1&skip_spend=1" }

// ResetPath returns the path of the reset claim for an organization
// (escaped): POST {base}/api/organizations/{org}/reset_rate_limits.
func ResetPath(org string) string {
	return "/api/organizations/" + url.PathEscape(org) + "/reset_rate_limits"
}

// ResetBody returns the JSON body of the reset claim,
// {"program":"juniper_tide"} (a fresh slice on every call).
func ResetBody() []byte { return []byte(`{"program":"` + ResetProgram + `"}`) }

// OrganizationHeader is the response header in which Anthropic's API
// names the organization the API key or access token of the request
// belongs to (documented with the API's response headers). The usage
// probe's answer carries it like every answer of the API.
const OrganizationHeader = "anthropic-organization-id"

// BearerBeta is the anthropic-beta value that lets an OAuth access token
// (a Claude subscription's) authenticate with Authorization: Bearer on
// the API, the usage probe included.
const BearerBeta = "oauth-2025-04-20"

// Usage is the juniper_tide block of the usage probe, and the
// organization the probe's answer names.
type Usage struct {
	// OrganizationID is the organization of the connection, from the
	// answer's OrganizationHeader, else from the body (see ParseUsage);
	// "" when neither names one.
	OrganizationID string
	// Arm is the experiment arm; ArmReset offers the reset.
	Arm string
	// Available reports that the reset can be claimed now.
	Available bool
	// NextAvailableAt is when it can be claimed again; zero when absent.
	NextAvailableAt time.Time
}

// Claimable reports whether the flow should POST the claim: arm "reset"
// and available.
func (u Usage) Claimable() bool { return u.Arm == ArmReset && u.Available }

// Outcome is the ResetOutcome of a probe that shows no claimable reset:
// already_used when the reset arm is not available now, else not_offered,
// with the probe's next_available_at.
func (u Usage) Outcome() ResetOutcome {
	res := ResultNotOffered
	if u.Arm == ArmReset {
		res = ResultAlreadyUsed
	}
	return ResetOutcome{Result: res, NextAvailableAt: u.NextAvailableAt}
}

// ResetOrg returns the organization whose reset the flow claims: the
// configured organization_uuid, else the one the usage probe named; false
// when neither is known (the flow then fails and backs off).
func (u Usage) ResetOrg(cfg Config) (string, bool) {
	if cfg.OrgUUID != "" {
		return cfg.OrgUUID, true
	}
	return u.OrganizationID, u.OrganizationID != ""
}

type usageBody struct {
	// The organization id, should the body carry one: these member names
	// are not documented for the usage probe (the header is); they are
	// the names Anthropic's other OAuth answers use for it.
	OrganizationUUID string `json:"organization_uuid"`
	OrganizationID   string `json:"organization_id"`
	Organization     *struct {
		UUID string `json:"uuid"`
		ID   string `json:"id"`
	} `json:"organization"`
	JuniperTide *struct {
		Arm             string          `json:"arm"`
		Available       bool            `json:"available"`
		NextAvailableAt json.RawMessage `json:"next_available_at"`
	} `json:"juniper_tide"`
}

// ParseUsage reads the usage probe's answer: its status, its headers
// (names lower-cased) and its body. A non-2xx status, a body that is not
// JSON or an unreadable next_available_at is an error; a missing
// juniper_tide block is not offered. The organization comes from the
// OrganizationHeader, else from the body's organization_uuid,
// organization_id or organization.{uuid,id} (an undocumented fallback).
func ParseUsage(status int, header map[string]string, body []byte) (Usage, error) {
	if status < 200 || status > 299 {
		return Usage{}, fmt.Errorf("usage probe: status %d: %s", status, snippet(body))
	}
	var b usageBody
	if err := json.Unmarshal(body, &b); err != nil {
		return Usage{}, fmt.Errorf("usage probe: decode: %w", err)
	}
	u := Usage{OrganizationID: strings.TrimSpace(header[OrganizationHeader])}
	if u.OrganizationID == "" {
		u.OrganizationID = bodyOrganization(&b)
	}
	if b.JuniperTide == nil {
		return u, nil
	}
	next, err := parseJSONTime(b.JuniperTide.NextAvailableAt)
	if err != nil {
		return Usage{}, fmt.Errorf("usage probe: next_available_at: %w", err)
	}
	u.Arm, u.Available, u.NextAvailableAt = b.JuniperTide.Arm, b.JuniperTide.Available, next
	return u, nil
}

// bodyOrganization returns the first organization id the usage body
// names, "" for none.
func bodyOrganization(b *usageBody) string {
	ids := []string{b.OrganizationUUID, b.OrganizationID}
	if b.Organization != nil {
		ids = append(ids, b.Organization.UUID, b.Organization.ID)
	}
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			return id
		}
	}
	return ""
}

// ParseResetResponse reads the reset claim's answer {"result": ...,
// "next_available_at"?: ...}. A non-2xx status, a bad body or a result
// other than reset, not_limited, already_used and not_offered sets Err.
func ParseResetResponse(status int, body []byte) ResetOutcome {
	if status < 200 || status > 299 {
		return ResetOutcome{Err: fmt.Errorf("reset claim: status %d: %s", status, snippet(body))}
	}
	var b struct {
		Result          string          `json:"result"`
		NextAvailableAt json.RawMessage `json:"next_available_at"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return ResetOutcome{Err: fmt.Errorf("reset claim: decode: %w", err)}
	}
	switch b.Result {
	case ResultReset, ResultNotLimited, ResultAlreadyUsed, ResultNotOffered:
	default:
		return ResetOutcome{Err: fmt.Errorf("reset claim: unknown result %q", b.Result)}
	}
	next, err := parseJSONTime(b.NextAvailableAt)
	if err != nil {
		return ResetOutcome{Err: fmt.Errorf("reset claim: next_available_at: %w", err)}
	}
	return ResetOutcome{Result: b.Result, NextAvailableAt: next}
}

// parseJSONTime reads null / absent (zero time), an RFC 3339 string or a
// unix epoch number (seconds, or milliseconds ≥ 1e12).
func parseJSONTime(raw json.RawMessage) (time.Time, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, fmt.Errorf("decode: %w", err)
		}
		if s == "" {
			return time.Time{}, nil
		}
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t, nil
		}
		if t, ok := parseTime(s); ok {
			return t, nil
		}
		return time.Time{}, fmt.Errorf("%q is not a time", s)
	}
	if _, err := strconv.ParseFloat(string(raw), 64); err != nil {
		return time.Time{}, errors.New("not a string, number or null")
	}
	if t, ok := parseTime(string(raw)); ok {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%s is not a time", raw)
}

func snippet(body []byte) string {
	if len(body) > maxReportedBody {
		return strconv.Quote(string(body[:maxReportedBody])) + "…"
	}
	return strconv.Quote(string(body))
}
