package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPaceHint(t *testing.T) {
	now := time.Date(2025, 7, 1, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		h    map[string]string
		want time.Duration
		ok   bool
	}{
		{"requests empty", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5s"}, 1500 * time.Millisecond, true},
		{"tokens empty, requests left", map[string]string{"x-ratelimit-remaining-requests": "4", "x-ratelimit-reset-requests": "1s",
			"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"}, 6 * time.Minute, true},
		{"both empty: the later reset", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s",
			"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms"}, 2 * time.Second, true},
		{"unsuffixed, delta seconds", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "3"}, 3 * time.Second, true},
		{"unix seconds", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1751360410"}, 10 * time.Second, true},
		{"anthropic RFC 3339", map[string]string{"anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": "2025-07-01T09:00:30Z"}, 30 * time.Second, true},
		{"anthropic left", map[string]string{"anthropic-ratelimit-tokens-remaining": "10", "anthropic-ratelimit-tokens-reset": "2025-07-01T09:00:30Z"}, 0, false},
		{"some left", map[string]string{"x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "1s"}, 0, false},
		{"empty without a reset", map[string]string{"x-ratelimit-remaining-requests": "0"}, 0, false},
		{"reset without a remaining count", map[string]string{"x-ratelimit-reset-requests": "1s"}, 0, false},
		{"reset in the past", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1751359000"}, 0, false},
		{"unreadable reset", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "soon"}, 0, false},
		{"capped", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "99999h"}, MaxRetryHint, true},
		{"no headers", nil, 0, false},
		{"a limit of 0 is no limit", map[string]string{"x-ratelimit-limit-requests": "0", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"}, 0, false},
		{"anthropic limit of 0", map[string]string{"anthropic-ratelimit-requests-limit": "0", "anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": "2025-07-01T09:00:30Z"}, 0, false},
	}
	for _, tc := range tests {
		got, ok := PaceHint(tc.h, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: PaceHint = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestPacerKeepsTheLaterMarkAndDropsExpiredOnes(t *testing.T) {
	now := time.Date(2025, 7, 1, 9, 0, 0, 0, time.UTC)
	p := newPacer()
	k := connKey{"p", "c"}
	if !p.pace(k, now.Add(2*time.Second)) || p.pace(k, now.Add(time.Second)) {
		t.Fatal("an earlier mark replaced a later one")
	}
	if until, ok := p.check(k, now.Add(1999*time.Millisecond)); !ok || !until.Equal(now.Add(2*time.Second)) {
		t.Fatalf("check = %v, %v", until, ok)
	}
	if _, ok := p.check(k, now.Add(2*time.Second)); ok {
		t.Fatal("paced at its reset")
	}
	if p.n.Load() != 0 || len(p.list("", now)) != 0 {
		t.Fatal("the expired mark was kept")
	}
	p.pace(k, now.Add(time.Second))
	p.pace(connKey{"q", "c"}, now.Add(time.Second))
	if l := p.list("q", now); len(l) != 1 || l[0].key.provider != "q" {
		t.Fatalf("list(q) = %+v", l)
	}
	if !p.clear(k, now) || p.clear(k, now) {
		t.Fatal("clear did not report the live mark once")
	}
}

// A paced connection's exclusion ends with the later of its cooldown and
// its mark; the cooldown manager shows the mark; an operator's clear
// removes it; providers whose hints are off and disable_cooling
// connections are never paced.
func TestPacingBesideACooldown(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	empty := map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "5s"}
	if d, ok := te.ObserveRateLimit("openai", "key-a", empty); !ok || d != 5*time.Second {
		t.Fatalf("ObserveRateLimit = %v, %v", d, ok)
	}
	te.fail(t, http429("openai", "key-a", "gpt-4o"))
	paced := Exclusion{Reason: ExclusionConnectionCooldown, Until: engEpoch.Add(5 * time.Second), Detail: DetailPaced}
	if ex, ok := te.Check("openai", "key-a", "gpt-4o"); !ok || ex != paced {
		t.Fatalf("Check = %+v, %v; want %+v", ex, ok, paced)
	}
	var cs *ConnectionStatus
	for _, c := range te.Cooldowns("openai") {
		if c.Connection == "key-a" {
			cs = &c
		}
	}
	if cs == nil || !cs.Paced || cs.RemainingMS != 5000 || !cs.RateLimitedUntil.Equal(paced.Until) {
		t.Fatalf("cooldown manager: %+v", cs)
	}
	if res, err := te.ClearCooldowns(t.Context(), ClearRequest{ConnectionIDs: []string{"openai/key-a", "openai/key-b"}}); err != nil || res.Cleared != 1 || res.Unchanged != 1 {
		t.Fatalf("clear = %+v, %v", res, err)
	}
	if ex, ok := te.Check("openai", "key-a", "gpt-4o"); ok {
		t.Fatalf("still excluded after the clear: %+v", ex)
	}
	for _, c := range [][2]string{{"claude", "acct-1"}, {"vllm", "gpu-2"}} {
		if _, ok := te.ObserveRateLimit(c[0], c[1], empty); ok {
			t.Errorf("%s/%s paced", c[0], c[1])
		}
		if ex, ok := te.Check(c[0], c[1], "m"); ok {
			t.Errorf("%s/%s excluded: %+v", c[0], c[1], ex)
		}
	}
}

// connection_order takes "headroom" (the default) or "config"; anything
// else is refused naming the field.
func TestConnectionOrderSetting(t *testing.T) {
	if got := DefaultSettings().ConnectionOrder; got != ConnectionOrderHeadroom {
		t.Fatalf("default %q", got)
	}
	s, err := ApplyPatch(DefaultSettings(), []byte(`{"connection_order":"config"}`))
	if err != nil || s.ConnectionOrder != ConnectionOrderConfig {
		t.Fatalf("config: %+v, %v", s.ConnectionOrder, err)
	}
	for _, bad := range []string{`"random"`, `""`} {
		_, err := ApplyPatch(DefaultSettings(), []byte(`{"connection_order":`+bad+`}`))
		if !errors.Is(err, ErrInvalidSettings) || !strings.Contains(err.Error(), "connection_order") {
			t.Errorf("connection_order %s: %v", bad, err)
		}
	}
}
