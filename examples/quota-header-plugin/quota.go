package main

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/sdk"
)

const (
	remainingHeader = "x-acme-quota-remaining"
	resetHeader     = "x-acme-quota-reset"
	// ruleID names this rule in the gateway's outcome and explain output.
	ruleID = "acme.quota_header"
	// maxCooldown bounds the cooldown a reset header can ask for.
	maxCooldown = 24 * time.Hour
	// epochThreshold separates the two forms of the reset header: values
	// at or above it are Unix seconds, smaller ones are seconds from now.
	epochThreshold = 1_000_000_000
)

// classify decides quota_exhausted (connection scope) when the remaining
// quota header is zero or negative, with the cooldown taken from the reset
// header. Anything else is left to the gateway.
func classify(in sdk.ErrorInput) (sdk.Decision, bool) {
	raw, ok := in.Headers.Lookup(remainingHeader)
	if !ok {
		return sdk.Decision{}, false
	}
	remaining, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil {
		sdk.Log(sdk.LevelWarn, "ignoring unparsable "+remainingHeader+" "+strconv.Quote(raw)+" on connection "+in.Connection)
		return sdk.Decision{}, false
	}
	if remaining > 0 {
		return sdk.Decision{}, false
	}
	d := sdk.Decision{Reason: sdk.ReasonQuotaExhausted, Scope: sdk.ScopeConnection, RuleID: ruleID}
	msg := "quota exhausted on connection " + in.Connection
	if cooldown, ok := resetCooldown(in.Headers.Get(resetHeader), sdk.Now()); ok {
		d.CooldownMS = cooldown.Milliseconds()
		msg += "; cooling down for " + cooldown.String()
	} else {
		msg += "; no usable " + resetHeader + ", the gateway picks the cooldown"
	}
	sdk.Log(sdk.LevelInfo, msg)
	return d, true
}

// resetCooldown turns the reset header into a wait from now: seconds from
// now (fractions allowed) or, at or above epochThreshold, Unix seconds. It
// returns false for a missing, malformed, negative or already passed reset,
// and caps the wait at maxCooldown.
func resetCooldown(raw string, now time.Time) (time.Duration, bool) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return 0, false
	}
	secs, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || secs < 0 {
		return 0, false
	}
	var d time.Duration
	if secs >= epochThreshold {
		d = time.Unix(int64(secs), 0).Sub(now)
	} else {
		d = time.Duration(math.Min(secs, maxCooldown.Seconds()) * float64(time.Second))
	}
	if d <= 0 {
		return 0, false
	}
	return min(d, maxCooldown), true
}
