package watchdog

import (
	"time"
)

// Default content-stall budgets (docs/resilience.md §9, "adaptive"):
//
//   - DefaultFirstContentStall, 90 s, runs from the start of the attempt to
//     the first model output. It is the larger of the two because the first
//     token waits for prompt processing, which on a long context or a busy
//     upstream takes tens of seconds, and a reasoning model's first frame is
//     often its first thinking delta.
//   - DefaultBetweenContentStall, 60 s, runs from each model-output frame
//     (text, reasoning, tool call) to the next. A generating model sends
//     frames every few hundred milliseconds; a minute of lifecycle frames
//     and keep-alives only means it has stopped.
const (
	DefaultFirstContentStall   = 90 * time.Second
	DefaultBetweenContentStall = 60 * time.Second
)

// StallConfig configures the content-stall watchdog (§9).
type StallConfig struct {
	// FirstContent is the budget from the start of the attempt to the first
	// model-output frame.
	FirstContent time.Duration
	// BetweenContent is the budget from one model-output frame to the next.
	BetweenContent time.Duration
	// Disabled turns the watchdog off.
	Disabled bool
}

// DefaultStall returns the adaptive default budgets.
func DefaultStall() StallConfig {
	return StallConfig{FirstContent: DefaultFirstContentStall, BetweenContent: DefaultBetweenContentStall}
}

// StallFromSetting maps the stream_recovery.content_stall_timeout_ms
// setting: 0 or less is the adaptive default, a positive value is one
// budget for both phases. (The setting cannot disable the watchdog;
// STREAM_CONTENT_STALL_TIMEOUT_MS=0 can: StallConfig.Disabled.)
func StallFromSetting(ms int64) StallConfig {
	if ms <= 0 {
		return DefaultStall()
	}
	d := time.Duration(ms) * time.Millisecond
	return StallConfig{FirstContent: d, BetweenContent: d}
}

// withDefaults fills a zero or negative budget with its default.
func (c StallConfig) withDefaults() StallConfig {
	if c.FirstContent <= 0 {
		c.FirstContent = DefaultFirstContentStall
	}
	if c.BetweenContent <= 0 {
		c.BetweenContent = DefaultBetweenContentStall
	}
	return c
}

// Stall is the content-stall watchdog of one attempt. Only model output
// (FrameContent, FrameReasoning, FrameToolCall) restarts its budget;
// lifecycle, ping, usage, error and done frames never do. It is pure (time
// is passed in) and not goroutine-safe.
type Stall struct {
	cfg      StallConfig
	last     time.Time
	seen     bool
	disabled bool
}

// NewStall returns a watchdog whose first budget starts at start. A zero
// (or negative) budget takes its default; a Disabled configuration never
// expires.
func NewStall(cfg StallConfig, start time.Time) Stall {
	return Stall{cfg: cfg.withDefaults(), last: start, disabled: cfg.Disabled}
}

// Observe records a frame seen at at.
func (s *Stall) Observe(f Frame, at time.Time) {
	if f.Output() {
		s.last = at
		s.seen = true
	}
}

// Deadline returns when the watchdog expires if no model output arrives,
// or the zero time when it is disabled.
func (s *Stall) Deadline() time.Time {
	if s.disabled {
		return time.Time{}
	}
	if s.seen {
		return s.last.Add(s.cfg.BetweenContent)
	}
	return s.last.Add(s.cfg.FirstContent)
}

// Budget returns the budget currently running (0 when disabled).
func (s *Stall) Budget() time.Duration {
	switch {
	case s.disabled:
		return 0
	case s.seen:
		return s.cfg.BetweenContent
	}
	return s.cfg.FirstContent
}

// Expired reports whether the budget has run out at now (now at or after
// the deadline).
func (s *Stall) Expired(now time.Time) bool {
	return !s.disabled && !now.Before(s.Deadline())
}
