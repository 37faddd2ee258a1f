// Package usagewall is the Claude usage wall of docs/resilience.md §2b: the
// lower-priority lane (`low_priority_mode`) and the session-limit reset
// (`auto_limit_reset`) of a Claude subscription (oauth) connection, as a pure,
// in-memory, per-connection state machine.
//
// The package sends nothing. The caller (the HTTP request path) asks a Wall
// what to do and executes the Decision:
//
//	hdr := wall.RequestHeaders(conn, cfg)          // add to the upstream request
//	... send, read status and lower-cased headers ...
//	d := wall.OnResponse(conn, cfg, usagewall.Response{
//		Status: status, Header: h, Slow: hdr != nil, RemainingStart: left})
//	switch d.Action {
//	case usagewall.ActionNone, usagewall.ActionEnded:
//		// the normal path: success, or classify + cooldown
//	case usagewall.ActionRetry:
//		// retry at once on the same connection with RequestHeaders again;
//		// the response never reaches the cooldown path
//	case usagewall.ActionWaitAndRetry:
//		// wait d.Wait (honouring the request context), then as ActionRetry
//	case usagewall.ActionTryReset:
//		// run the session-limit reset flow, then call OnResetResult with the
//		// same Response and execute the Decision it returns
//	}
//
// The reset flow, performed by the caller against the connection's base
// URL, authenticated with the connection's OAuth access token
// (Authorization: Bearer, anthropic-beta: BearerBeta):
//
//	GET  {base}UsageProbePath()         → u, err := ParseUsage(status, header, body)
//	err != nil                          → OnResetResult(..., ResetOutcome{Err: err})
//	!u.Claimable()                      → OnResetResult(..., u.Outcome())
//	org, ok := u.ResetOrg(cfg)          → !ok: OnResetResult(..., ResetOutcome{Err: ...})
//	POST {base}ResetPath(org) with ResetBody()
//	                                    → OnResetResult(..., ParseResetResponse(status, body))
//
// The organization is the configured organization_uuid, else the one the
// probe's answer names in its anthropic-organization-id header.
//
// Order (§2b): at a wall the reset flow is tried first when auto_limit_reset
// is on and allowed (CanTryReset); the lane is offered when the reset is off,
// not allowed, not available or failed. A reset that worked retries at full
// speed (no slow header).
//
// Header formats read (names lower-cased): times
// (anthropic-ratelimit-unified-reset, the slow-lane budget reset) are unix
// epoch seconds as Anthropic sends them, also accepted as epoch milliseconds
// or RFC 3339; durations (slow-retry-after, slow-max-wait) are seconds,
// integer or decimal. Unparsable values count as absent.
//
// Every timer is lazy: state is judged when it is read, against the
// injected engine.Clock. Nothing here starts a goroutine.
package usagewall
