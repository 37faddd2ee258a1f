package admission

import "testing"

// TestAnyQuotaShared: the one-counter answer agrees with QuotaShared asked
// of every connection, as max_concurrent, the quota-share switch and the
// connections change.
func TestAnyQuotaShared(t *testing.T) {
	spec := oauth("p", "c")
	spec.MaxConcurrent = 2
	m, _ := newManager(DefaultSettings(), spec, oauth("p", "unlimited"))
	if !m.AnyQuotaShared() || !m.QuotaShared("p", "c") || m.QuotaShared("p", "unlimited") {
		t.Fatal("max_concurrent 2 with quota-share on: p/c is shared, and so some connection is")
	}
	s := DefaultSettings()
	s.QuotaShareEnabled = false
	m.UpdateSettings(s)
	if m.AnyQuotaShared() || m.QuotaShared("p", "c") {
		t.Fatal("quota-share off: no connection is shared")
	}
	m.UpdateSettings(DefaultSettings())
	if !m.AnyQuotaShared() {
		t.Fatal("quota-share back on: p/c is shared again")
	}
	spec.MaxConcurrent = 0
	m.UpdateConnection(spec)
	if m.AnyQuotaShared() {
		t.Fatal("max_concurrent removed: no connection is shared")
	}
	spec.MaxConcurrent = 3
	m.UpdateConnection(spec)
	m.RemoveConnection("p", "c")
	if m.AnyQuotaShared() {
		t.Fatal("the shared connection removed: none is shared")
	}
}
