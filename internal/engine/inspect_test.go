package engine

import (
	"testing"
	"time"
)

func TestWindowGateView(t *testing.T) {
	s := DefaultSettings()
	s.ProviderCooldown.Enabled = true
	te := newTestEngine(t, s)
	now := te.clock.Now()
	v := te.WindowGateView("vllm")
	// local profile: 2 failures within 5 min cool for 1 min (§1b).
	if !v.Enabled || v.Threshold != 2 || v.WindowMS != 300_000 || v.CooldownMS != 60_000 || v.FailuresInWindow != 0 {
		t.Fatalf("fresh local gate = %+v", v)
	}
	te.fail(t, http429("vllm", "gpu-1", "llama"))
	if v = te.WindowGateView("vllm"); v.FailuresInWindow != 1 || !v.CoolingUntil.IsZero() {
		t.Fatalf("after one failure: %+v", v)
	}
	te.fail(t, http429("vllm", "gpu-2", "llama"))
	if v = te.WindowGateView("vllm"); !v.CoolingUntil.Equal(now.Add(time.Minute)) {
		t.Fatalf("after two failures: cooling until %v, want %v", v.CoolingUntil, now.Add(time.Minute))
	}
	if v := te.WindowGateView("openai"); v.Threshold != 15 || v.WindowMS != 30*60_000 || v.CooldownMS != 10*60_000 {
		t.Fatalf("apikey gate = %+v: want 15 within 30 min, cools 10 min", v)
	}
	te2 := newTestEngine(t, DefaultSettings())
	if te2.WindowGateView("vllm").Enabled {
		t.Fatal("the gate is off by default")
	}
}
