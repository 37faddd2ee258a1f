package admission

import (
	"errors"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

func TestProtected(t *testing.T) {
	on, off := true, false
	tests := []struct {
		name     string
		profile  engine.Profile
		disabled bool
		flag     bool
		saved    bool
		env      *bool
		want     bool
	}{
		{"active apikey, auto-enable on", engine.ProfileAPIKey, false, false, true, nil, true},
		{"flag false is no opt-out while auto-enable is on", engine.ProfileAPIKey, false, false, true, nil, true},
		{"inactive apikey", engine.ProfileAPIKey, true, false, true, nil, false},
		{"inactive apikey with the flag", engine.ProfileAPIKey, true, true, true, nil, true},
		{"oauth is not auto-enabled", engine.ProfileOAuth, false, false, true, nil, false},
		{"local is not auto-enabled", engine.ProfileLocal, false, false, true, nil, false},
		{"oauth with the flag", engine.ProfileOAuth, false, true, true, nil, true},
		{"auto-enable saved off", engine.ProfileAPIKey, false, false, false, nil, false},
		{"env off wins over saved on", engine.ProfileAPIKey, false, false, true, &off, false},
		{"env on wins over saved off", engine.ProfileAPIKey, false, false, false, &on, true},
		{"env off keeps an explicit flag", engine.ProfileAPIKey, false, true, true, &off, true},
	}
	for _, tt := range tests {
		s := DefaultSettings()
		s.AutoEnableAPIKey = tt.saved
		s.AutoEnableEnv = tt.env
		m, _ := newManager(s, ConnSpec{Provider: "p", Connection: "c", Profile: tt.profile, Disabled: tt.disabled, RateLimitProtection: tt.flag})
		if got := m.Protected("p", "c"); got != tt.want {
			t.Errorf("%s: Protected = %v, want %v", tt.name, got, tt.want)
		}
	}
	m, _ := newManager(DefaultSettings())
	if m.Protected("p", "nope") {
		t.Error("unknown connection protected")
	}
}

// TestProtectionFlagSurvivesUpdates: POST /api/rate-limits sets the flag;
// updating the connection's other fields never changes it.
func TestProtectionFlagSurvivesUpdates(t *testing.T) {
	spec := oauth("p", "c")
	m, _ := newManager(DefaultSettings(), spec, oauth("q", "c"), oauth("q", "only-q"))
	if err := m.SetProtection("p", "nope", true); !errors.Is(err, ErrUnknownConnection) {
		t.Fatalf("SetProtection(unknown) = %v", err)
	}
	if err := m.SetProtection("p", "c", true); err != nil {
		t.Fatal(err)
	}
	spec.MaxConcurrent = 3 // an edit of another field, flag false in the spec
	m.UpdateConnection(spec)
	if !m.Protected("p", "c") || !statsOf(t, m, "p", "c").RateLimitProtection {
		t.Fatal("UpdateConnection cleared the protection flag")
	}
	if err := m.SetProtection("p", "c", false); err != nil {
		t.Fatal(err)
	}
	spec.RateLimitProtection = true
	m.UpdateConnection(spec)
	if m.Protected("p", "c") {
		t.Fatal("UpdateConnection set the protection flag")
	}

	if err := m.SetProtectionByID("only-q", true); err != nil || !m.Protected("q", "only-q") {
		t.Errorf("SetProtectionByID(bare id) = %v", err)
	}
	if err := m.SetProtectionByID("c", true); err == nil {
		t.Error("SetProtectionByID of an id two providers share succeeded")
	}
	if err := m.SetProtectionByID("q/c", true); err != nil || !m.Protected("q", "c") || m.Protected("p", "c") {
		t.Errorf("SetProtectionByID(provider/connection) = %v", err)
	}
	if err := m.SetProtectionByID("nope", true); !errors.Is(err, ErrUnknownConnection) {
		t.Errorf("SetProtectionByID(unknown) = %v", err)
	}

	// A removed and re-added connection starts from its spec.
	m.RemoveConnection("q", "c")
	if m.Protected("q", "c") {
		t.Error("removed connection still protected")
	}
	m.UpdateConnection(oauth("q", "c"))
	if m.Protected("q", "c") {
		t.Error("re-added connection kept the old flag")
	}
}
