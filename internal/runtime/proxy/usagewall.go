package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/usagewall"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
)

// maxWallRetries bounds the same-connection retries of one attempt at the
// usage wall.
const maxWallRetries = 32

// wallConfig is the usage-wall configuration of a candidate; ok is false
// unless it is a Claude subscription connection — an oauth connection of a
// provider kind with a usage wall (anthropic) — that opted into one of
// the features (docs/resilience.md §2b).
func wallConfig(cd topology.Candidate) (usagewall.Config, bool) {
	c := cd.Connection
	if !cd.Provider.Adapter.UsageWall() || cd.Provider.Profile != engine.ProfileOAuth || (!c.LowPriorityMode && !c.AutoLimitReset) {
		return usagewall.Config{}, false
	}
	return usagewall.Config{LowPriorityMode: c.LowPriorityMode, AutoLimitReset: c.AutoLimitReset, OrgUUID: c.OrganizationUUID}, true
}

// warnWallOptIns logs, once at start, the usage-wall opt-ins that cannot
// apply: set on a connection that is not a Claude subscription (oauth)
// connection of a provider kind with a usage wall.
func warnWallOptIns(topo *topology.Topology, log hclog.Logger) {
	for _, pr := range topo.Providers {
		if pr.Adapter.UsageWall() && pr.Profile == engine.ProfileOAuth {
			continue
		}
		for _, c := range pr.Connections {
			if c.LowPriorityMode || c.AutoLimitReset {
				log.Warn("usage-wall options ignored: they apply to Claude subscription connections only (kind anthropic, profile oauth)",
					"provider", pr.ID, "connection", c.ID, "kind", pr.Adapter.Kind(), "profile", pr.Profile)
			}
		}
	}
}

// wallRetry asks the usage wall what to do with an upstream answer of a
// Claude subscription connection. It reports whether to retry the same
// connection now (after any wait it performed, on the proxy's clock); the
// intercepted 429 then never reaches the cooldown path.
func (p *Proxy) wallRetry(ctx context.Context, cd topology.Candidate, cfg usagewall.Config, status int, h http.Header, slow bool, started time.Time) bool {
	resp := usagewall.Response{Status: status, Header: lowerHeaders(h), Slow: slow,
		RemainingStart: p.up.Timeouts().FirstByte - time.Since(started)}
	d := p.wall.OnResponse(cd.Connection.Ref, cfg, resp)
	if d.Action == usagewall.ActionTryReset {
		d = p.wall.OnResetResult(cd.Connection.Ref, cfg, resp, p.resetFlow(ctx, cd, cfg))
	}
	switch d.Action {
	case usagewall.ActionRetry:
		return true
	case usagewall.ActionWaitAndRetry:
		return p.pause(ctx, d.Wait)
	case usagewall.ActionEnded:
		p.log.Info("usage-wall lane ended", "provider", cd.Provider.ID, "connection", cd.Connection.ID, "reason", d.EndReason)
	}
	return false
}

// resetFlow performs the session-limit reset of §2b: probe the usage
// endpoint and, when a reset is offered, claim it for the configured
// organization, else for the one the probe's answer names. Both calls
// authenticate with the connection's OAuth access token (Authorization:
// Bearer), never with x-api-key.
func (p *Proxy) resetFlow(ctx context.Context, cd topology.Candidate, cfg usagewall.Config) usagewall.ResetOutcome {
	base := strings.TrimSuffix(cd.Provider.BaseURL, "/v1")
	route := upstream.Route{LocalAddress: cd.Connection.LocalAddress, ProxyURL: cd.Connection.ProxyURL}
	call := func(method, url string, body []byte) (int, http.Header, []byte, error) {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, url, rd)
		if err != nil {
			return 0, nil, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+cd.Connection.APIKey)
		req.Header.Set("anthropic-beta", usagewall.BearerBeta)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", p.ua)
		resp, err := p.up.Do(req, route, upstream.Limits{})
		if err != nil {
			return 0, nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return resp.StatusCode, resp.Header, b, err
	}
	st, h, body, err := call(http.MethodGet, base+usagewall.UsageProbePath(), nil)
	if err != nil {
		return usagewall.ResetOutcome{Err: err}
	}
	u, err := usagewall.ParseUsage(st, lowerHeaders(h), body)
	if err != nil {
		return usagewall.ResetOutcome{Err: err}
	}
	if !u.Claimable() {
		return u.Outcome()
	}
	org, ok := u.ResetOrg(cfg)
	if !ok {
		return usagewall.ResetOutcome{Err: errors.New("usage probe: no organization id (no organization_uuid configured, no " +
			usagewall.OrganizationHeader + " in the answer)")}
	}
	st, _, body, err = call(http.MethodPost, base+usagewall.ResetPath(org), usagewall.ResetBody())
	if err != nil {
		return usagewall.ResetOutcome{Err: err}
	}
	return usagewall.ParseResetResponse(st, body)
}
