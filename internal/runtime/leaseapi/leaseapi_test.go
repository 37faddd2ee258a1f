package leaseapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/lease"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
)

var epoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const connA = "openai/key-a"

func owner(n int) string {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(n*17 + i)
	}
	return lease.OwnerPrefix + base64.RawURLEncoding.EncodeToString(b)
}

var (
	app1 = KeyInfo{ID: "app1", Scopes: []string{Scope}, AllowedConnections: []string{connA}, Authenticated: true}
	app2 = KeyInfo{ID: "app2", Scopes: []string{"chat", Scope}, AllowedConnections: []string{connA}, Authenticated: true}
)

// answer is a decoded Response body.
type answer struct {
	State      string `json:"state"`
	Generation int64  `json:"generation"`
	ExpiresAt  string `json:"expires_at"`
	Error      *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
		Param   string `json:"param"`
		State   string `json:"state"`
	} `json:"error"`
}

func decode(t *testing.T, r Response) answer {
	t.Helper()
	var a answer
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
	if r.Headers["Content-Type"] != "application/json" {
		t.Fatalf("Content-Type = %q", r.Headers["Content-Type"])
	}
	return a
}

func newManager(clock engine.Clock) *lease.Manager {
	return lease.New(memstore.New(clock), clock, lease.Options{})
}

// TestErrorTable runs every answer of the lease API through Handle. Each
// case starts from owner(1) holding generation 1 for app1, bound to connA.
func TestErrorTable(t *testing.T) {
	ctx := context.Background()
	o1 := owner(1)
	tests := []struct {
		name   string
		before func(m *lease.Manager)
		key    KeyInfo
		ct     string
		owner  string
		body   string
		status int
		code   string // error code, "" for success
		param  string
		state  string
		gen    int64
	}{
		{name: "no auth", key: KeyInfo{ID: "app1", Scopes: []string{Scope}, AllowedConnections: []string{connA}},
			ct: "application/json", owner: o1, body: `{"action":"renew"}`, status: 401, code: "invalid_api_key"},
		{name: "missing scope", key: KeyInfo{ID: "app1", Scopes: []string{"chat"}, AllowedConnections: []string{connA}, Authenticated: true},
			ct: "application/json", owner: o1, body: `{"action":"renew"}`, status: 403, code: "LEASE_NOT_PERMITTED"},
		{name: "empty allowed_connections", key: KeyInfo{ID: "app1", Scopes: []string{Scope}, Authenticated: true},
			ct: "application/json", owner: o1, body: `{"action":"renew"}`, status: 403, code: "LEASE_NOT_PERMITTED"},
		{name: "no content type", key: app1, ct: "", owner: o1, body: `{"action":"renew"}`, status: 415, code: "unsupported_media_type"},
		{name: "text/plain", key: app1, ct: "text/plain", owner: o1, body: `{"action":"renew"}`, status: 415, code: "unsupported_media_type"},
		{name: "form", key: app1, ct: "application/x-www-form-urlencoded", owner: o1, body: `action=renew`, status: 415, code: "unsupported_media_type"},
		{name: "json with charset", key: app1, ct: "Application/JSON; charset=utf-8", owner: o1, body: `{"action":"renew"}`, status: 200, gen: 1},
		{name: "missing owner", key: app1, ct: "application/json", owner: "", body: `{"action":"acquire"}`, status: 400, code: "LEASE_CONTEXT_REQUIRED"},
		{name: "blank owner", key: app1, ct: "application/json", owner: "   ", body: `{"action":"acquire"}`, status: 400, code: "LEASE_CONTEXT_REQUIRED"},
		{name: "malformed owner", key: app1, ct: "application/json", owner: "vlo_tooshort", body: `{"action":"acquire"}`, status: 400, code: "LEASE_CONTEXT_INVALID"},
		{name: "owner bad charset", key: app1, ct: "application/json", owner: o1[:len(o1)-1] + "+", body: `{"action":"acquire"}`, status: 400, code: "LEASE_CONTEXT_INVALID"},
		{name: "owner wrong prefix", key: app1, ct: "application/json", owner: "own_" + o1[4:], body: `{"action":"acquire"}`, status: 400, code: "LEASE_CONTEXT_INVALID"},
		{name: "empty body", key: app1, ct: "application/json", owner: o1, body: ``, status: 400, code: "invalid_request_error", param: "body"},
		{name: "invalid JSON", key: app1, ct: "application/json", owner: o1, body: `{"action":`, status: 400, code: "invalid_request_error", param: "body"},
		{name: "missing action", key: app1, ct: "application/json", owner: o1, body: `{}`, status: 400, code: "invalid_request_error", param: "action"},
		{name: "unknown action", key: app1, ct: "application/json", owner: o1, body: `{"action":"steal"}`, status: 400, code: "invalid_request_error", param: "action"},
		{name: "action not a string", key: app1, ct: "application/json", owner: o1, body: `{"action":1}`, status: 400, code: "invalid_request_error", param: "action"},
		{name: "generation not a number", key: app1, ct: "application/json", owner: o1, body: `{"action":"renew","generation":"one"}`, status: 400, code: "invalid_request_error", param: "generation"},
		{name: "generation zero", key: app1, ct: "application/json", owner: o1, body: `{"action":"renew","generation":0}`, status: 400, code: "invalid_request_error", param: "generation"},
		{name: "acquire new owner", key: app1, ct: "application/json", owner: owner(2), body: `{"action":"acquire","model":"gpt-4o"}`, status: 200, state: "ACTIVE", gen: 1},
		{name: "re-acquire keeps generation", key: app1, ct: "application/json", owner: o1, body: `{"action":"acquire"}`, status: 200, state: "ACTIVE", gen: 1},
		{name: "acquire after release is next generation", before: func(m *lease.Manager) { _ = m.Release(ctx, "app1", o1, 0) },
			key: app1, ct: "application/json", owner: o1, body: `{"action":"acquire"}`, status: 200, state: "ACTIVE", gen: 2},
		{name: "renew", key: app1, ct: "application/json", owner: o1, body: `{"action":"renew","generation":1}`, status: 200, state: "ACTIVE", gen: 1},
		{name: "renew stale generation", key: app1, ct: "application/json", owner: o1, body: `{"action":"renew","generation":2}`, status: 409, code: "LEASE_FENCE_STALE"},
		{name: "renew by foreign key", key: app2, ct: "application/json", owner: o1, body: `{"action":"renew"}`, status: 409, code: "LEASE_OWNER_MISMATCH"},
		{name: "release by foreign key", key: app2, ct: "application/json", owner: o1, body: `{"action":"release"}`, status: 409, code: "LEASE_OWNER_MISMATCH"},
		{name: "acquire by foreign key", key: app2, ct: "application/json", owner: o1, body: `{"action":"acquire"}`, status: 409, code: "LEASE_OWNER_MISMATCH"},
		{name: "renew after release", before: func(m *lease.Manager) { _ = m.Release(ctx, "app1", o1, 0) },
			key: app1, ct: "application/json", owner: o1, body: `{"action":"renew"}`, status: 409, code: "LEASE_NOT_ACTIVE", state: "RELEASED"},
		{name: "renew unknown owner", key: app1, ct: "application/json", owner: owner(3), body: `{"action":"renew"}`, status: 409, code: "LEASE_NOT_ACTIVE"},
		{name: "release", key: app1, ct: "application/json", owner: o1, body: `{"action":"release","generation":1}`, status: 200, state: "RELEASED"},
		{name: "release stale generation", key: app1, ct: "application/json", owner: o1, body: `{"action":"release","generation":7}`, status: 409, code: "LEASE_FENCE_STALE"},
		{name: "release twice", before: func(m *lease.Manager) { _ = m.Release(ctx, "app1", o1, 0) },
			key: app1, ct: "application/json", owner: o1, body: `{"action":"release"}`, status: 200, state: "RELEASED"},
		{name: "release unknown owner", key: app1, ct: "application/json", owner: owner(4), body: `{"action":"release"}`, status: 200, state: "RELEASED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clocktest.NewClock(epoch)
			m := newManager(clock)
			l, err := m.Acquire(ctx, "app1", o1, "gpt-4o")
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Bind(ctx, l, connA); err != nil {
				t.Fatal(err)
			}
			if tt.before != nil {
				tt.before(m)
			}
			clock.Advance(time.Minute)
			r := Handle(ctx, m, tt.key, tt.ct, tt.owner, []byte(tt.body))
			a := decode(t, r)
			if r.Status != tt.status {
				t.Fatalf("status = %d, want %d (body %s)", r.Status, tt.status, r.Body)
			}
			for _, secret := range []string{o1[len(lease.OwnerPrefix):], connA, "key-a"} {
				if strings.Contains(string(r.Body), secret) {
					t.Fatalf("body %s reveals %q", r.Body, secret)
				}
			}
			if tt.code != "" {
				if a.Error == nil || a.Error.Code != tt.code || a.Error.Param != tt.param || a.Error.State != tt.state || a.Error.Message == "" || a.Error.Type == "" {
					t.Fatalf("error = %+v, want code %s param %q state %q", a.Error, tt.code, tt.param, tt.state)
				}
				return
			}
			if a.Error != nil {
				t.Fatalf("unexpected error %+v", a.Error)
			}
			wantState := tt.state
			if wantState == "" {
				wantState = "ACTIVE"
			}
			if a.State != wantState || a.Generation != tt.gen {
				t.Fatalf("answer = %+v, want state %s generation %d", a, wantState, tt.gen)
			}
			var raw map[string]any
			_ = json.Unmarshal(r.Body, &raw)
			if wantState == "ACTIVE" {
				if a.ExpiresAt != clock.Now().Add(lease.DefaultTTL).Format(time.RFC3339) {
					t.Fatalf("expires_at = %s, want now + 5 min", a.ExpiresAt)
				}
				if len(raw) != 3 {
					t.Fatalf("ACTIVE body has members %v, want state, generation, expires_at", raw)
				}
			} else if len(raw) != 1 {
				t.Fatalf("RELEASED body has members %v, want state only", raw)
			}
		})
	}
}

func TestLifecycleThroughHandle(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.NewClock(epoch)
	m := newManager(clock)
	o := owner(1)
	call := func(body string) answer {
		t.Helper()
		return decode(t, Handle(ctx, m, app1, "application/json", o, []byte(body)))
	}
	if a := call(`{"action":"acquire","model":"m1"}`); a.Generation != 1 || a.ExpiresAt != "2025-06-01T12:05:00Z" {
		t.Fatalf("acquire = %+v", a)
	}
	clock.Advance(2 * time.Minute)
	if a := call(`{"action":"renew","generation":1}`); a.Generation != 1 || a.ExpiresAt != "2025-06-01T12:07:00Z" {
		t.Fatalf("renew = %+v", a)
	}
	if a := call(`{"action":"acquire","model":"m2"}`); a.Generation != 1 {
		t.Fatalf("re-acquire = %+v, want generation 1", a)
	}
	for range 2 {
		if a := call(`{"action":"release"}`); a.State != "RELEASED" {
			t.Fatalf("release = %+v", a)
		}
	}
	if a := call(`{"action":"acquire"}`); a.Generation != 2 {
		t.Fatalf("acquire after release = %+v, want generation 2", a)
	}
	// Expiry: renew too late fails; acquire continues at generation 3.
	clock.Advance(lease.DefaultTTL)
	if a := call(`{"action":"renew"}`); a.Error == nil || a.Error.Code != "LEASE_NOT_ACTIVE" || a.Error.State != "EXPIRED" {
		t.Fatalf("renew after expiry = %+v", a)
	}
	if a := call(`{"action":"acquire"}`); a.Generation != 3 {
		t.Fatalf("acquire after expiry = %+v, want generation 3", a)
	}
}

func TestParseGeneration(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		code string
	}{
		{"1", 1, ""},
		{" 42 ", 42, ""},
		{"", 0, lease.CodeContextRequired},
		{"0", 0, lease.CodeContextInvalid},
		{"-1", 0, lease.CodeContextInvalid},
		{"1.5", 0, lease.CodeContextInvalid},
		{"abc", 0, lease.CodeContextInvalid},
		{"99999999999999999999", 0, lease.CodeContextInvalid},
	}
	for _, tt := range tests {
		g, err := ParseGeneration(tt.in)
		if tt.code == "" {
			if err != nil || g != tt.want {
				t.Errorf("ParseGeneration(%q) = %d, %v; want %d", tt.in, g, err, tt.want)
			}
			continue
		}
		var le *lease.Error
		if !errors.As(err, &le) || le.Code != tt.code || le.Status != 400 {
			t.Errorf("ParseGeneration(%q) error = %v, want 400 %s", tt.in, err, tt.code)
		}
	}
}

func TestErrorResponse(t *testing.T) {
	now := epoch
	r := ErrorResponse(lease.Capacity([]time.Time{now.Add(150 * time.Second), now.Add(90 * time.Second)}, now))
	a := decode(t, r)
	if r.Status != 429 || r.Headers["Retry-After"] != "90" || a.Error.Code != "LEASE_CAPACITY_UNAVAILABLE" || a.Error.State != "WAITING_FOR_CAPACITY" {
		t.Fatalf("capacity answer = %d %v %s", r.Status, r.Headers, r.Body)
	}
	r = ErrorResponse(lease.Capacity([]time.Time{now.Add(2 * time.Hour)}, now))
	if r.Headers["Retry-After"] != "300" {
		t.Fatalf("Retry-After = %q, want 300 (bounded)", r.Headers["Retry-After"])
	}
	cause := errors.New("disk on fire at /var/lib/x")
	r = ErrorResponse(cause)
	if r.Status != 500 || strings.Contains(string(r.Body), "disk") || !errors.Is(r.Err, cause) {
		t.Fatalf("internal answer = %d %s %v", r.Status, r.Body, r.Err)
	}
	if _, ok := ErrorResponse(lease.ErrFenceStale).Headers["Retry-After"]; ok {
		t.Fatal("Retry-After on an error with no known wait")
	}
}

func TestHeaders(t *testing.T) {
	if len(Headers) != 2 || Headers[0] != "X-Breakwater-Lease-Owner" || Headers[1] != "X-Breakwater-Lease-Generation" {
		t.Fatalf("Headers = %v", Headers)
	}
}
