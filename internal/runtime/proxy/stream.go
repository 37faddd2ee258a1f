package proxy

import (
	"bufio"
	"context"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/watchdog"
	"github.com/breakwater-dev/breakwater/internal/runtime/relay"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
)

// Stream is a committed streamed answer (docs/resilience.md §8,
// principle 7 of docs/architecture.md). The caller sends the Result's
// status and headers and then calls Run with its writer, once; if the
// response cannot be sent at all it calls Close instead. Either way the
// request is finalised exactly once: the outcome recorded (a success, the
// failure after commit, or nothing for a client that went away), the
// admission ticket released, the affinity session pinned, the strategy
// told, and the access line and metrics written. A caller whose writer
// pulls the body calls Next until the end, then End, instead of Run.
type Stream struct {
	p      *Proxy
	x      *state
	cd     topology.Candidate
	s      *relay.Stream
	tm     *attemptTimers
	ctx    context.Context
	cancel context.CancelFunc
	t0     time.Time
	status int
	once   sync.Once
}

// Run relays the stream to w, flushing after each event, and finalises
// the request. It returns how the stream ended. Calls after the first do
// nothing and report relay.EndClientGone.
func (st *Stream) Run(w *bufio.Writer) relay.End {
	return st.end(func() relay.Result { return st.s.Run(w) })
}

// end ends the relay with ended and finalises the request, once.
func (st *Stream) end(ended func() relay.Result) relay.End {
	end := relay.EndClientGone
	st.once.Do(func() {
		res := ended()
		st.finalise(res)
		end = res.End
	})
	return end
}

// Next relays the stream up to the next client bytes (relay.Stream.Next):
// for a caller whose writer pulls the body, in place of Run. The bytes are
// valid until the next call; more is false once the stream has ended.
// After Next reports the end, or when the client could not be written to,
// the caller calls End.
func (st *Stream) Next() (b []byte, more bool) { return st.s.Next() }

// End finalises a stream relayed with Next, once (gone: the client could
// not be written to, or the caller stopped early), and returns how it
// ended. Calls after the first, or after Run or Close, do nothing and
// report relay.EndClientGone.
func (st *Stream) End(gone bool) relay.End {
	return st.end(func() relay.Result { return st.s.End(gone) })
}

// Close abandons a stream that was never Run, finalising it as a client
// that went away. It does nothing after Run.
func (st *Stream) Close() {
	st.once.Do(func() {
		st.s.Close()
		st.finalise(relay.Result{End: relay.EndClientGone})
	})
}

// finalise records how the stream ended, once.
func (st *Stream) finalise(res relay.Result) {
	p, x, cd := st.p, st.x, st.cd
	st.cancel()
	x.upstreamTime += time.Since(st.t0)
	code := ""
	switch {
	case res.Empty():
		// Committed, so not retried: recorded as what it was (§9).
		code = string(engine.ReasonEmptyResponse)
		p.recordEmpty(st.ctx, x, cd, st.status)
		p.comboOutcome(x, cd, false)
		if p.metrics != nil {
			p.metrics.Stream("abort", code)
		}
	case res.End == relay.EndComplete:
		p.recordSuccess(st.ctx, x, cd, st.status)
	case res.End == relay.EndClientGone:
		// A client that went away says nothing about upstream health.
		code = string(engine.ReasonClientAbort)
		if p.metrics != nil {
			p.metrics.Stream("client_gone", "")
		}
	default:
		code = res.Failure.Reason
		p.recordStreamEnd(st.ctx, x, cd, st.tm, res.Failure)
		p.comboOutcome(x, cd, false)
		if p.metrics != nil {
			p.metrics.Stream("abort", res.Failure.Reason)
		}
	}
	p.finish(x, st.status, code)
}

// committed takes a stream primed up to its commit point. A stream that
// already ended with neither content nor a tool call (an empty answer,
// detected before any byte reached the client) is closed, recorded as
// empty_response and reported false: the caller fails over. Otherwise it
// notes the stream's time to first byte (metrics.StreamTTFB) and reports
// true.
func (p *Proxy) committed(ctx context.Context, x *state, cd topology.Candidate, s *relay.Stream, status int, t0 time.Time) bool {
	if s.Empty() {
		s.Close()
		x.upstreamTime += time.Since(t0)
		p.recordEmpty(ctx, x, cd, status)
		if p.metrics != nil {
			p.metrics.Stream("failover", string(engine.ReasonEmptyResponse))
		}
		return false
	}
	x.ttfb = time.Since(x.start)
	if p.metrics != nil {
		p.metrics.StreamTTFB(x.ttfb)
	}
	return true
}

// stallConfig is the content-stall watchdog of the stream_recovery
// settings; STREAM_CONTENT_STALL_TIMEOUT_MS, read with the configuration,
// wins (0 disables the watchdog).
func (p *Proxy) stallConfig(st engine.StreamRecoverySettings) watchdog.StallConfig {
	if v := p.cfg.Env.StreamContentStallTimeoutMS; v != nil {
		if *v == 0 {
			return watchdog.StallConfig{Disabled: true}
		}
		return watchdog.StallFromSetting(*v)
	}
	return watchdog.StallFromSetting(st.ContentStallTimeoutMS)
}

// throughputConfig is the throughput watchdog of the stream_recovery
// settings; STREAM_THROUGHPUT_WATCHDOG_ENABLED, read with the
// configuration, wins over its enabled flag.
func (p *Proxy) throughputConfig(st engine.StreamRecoverySettings) watchdog.ThroughputConfig {
	tw := st.ThroughputWatchdog
	c := watchdog.ThroughputConfig{
		Enabled:           tw.Enabled,
		Warmup:            ms(tw.WarmupMS),
		Window:            ms(tw.WindowMS),
		MinBytesPerSecond: tw.MinUsefulBytesPerSecond,
		MinBytes:          tw.MinUsefulBytes,
	}
	if v := p.cfg.Env.StreamThroughputWatchdog; v != nil {
		c.Enabled = *v
	}
	return c
}
