package plugins

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// Every guest call runs under a deadline, enforced one of two ways:
//
//   - instrumented (the default): at load the host rewrites the module
//     (plugins/internal/interrupt) so that every loop iteration reads an
//     injected global, interruptExport, and traps when it is non-zero. A
//     timer sets it when the call's deadline passes. The check is a load
//     and a branch, so guest code runs at full speed.
//   - runtime checks (the fallback, for a module the rewriter cannot
//     handle): wazero's CloseOnContextDone, which calls into the Go
//     runtime at every loop iteration — about 35 ns each, which makes a Go
//     guest roughly 10–20 times slower.
//
// Either way a call that overruns is stopped, its instance closed and the
// call counted as a timeout.

// interruptExport is the global the host injects into instrumented guests.
const interruptExport = "breakwater_host_interrupt"

// errDeadline marks a call stopped at its deadline.
var errDeadline = errors.New("deadline exceeded")

// interrupter stops one instance's running call at its deadline. An
// instance serves one call at a time; fire runs on a timer goroutine and
// synchronises with arm and disarm through mu.
type interrupter struct {
	global api.MutableGlobal
	timer  *time.Timer

	mu    sync.Mutex
	armed bool
	at    time.Time // deadline of the armed call
	fired bool      // the global was set: the instance must not be reused
}

func newInterrupter(g api.MutableGlobal) *interrupter {
	it := &interrupter{global: g}
	it.timer = time.AfterFunc(time.Duration(math.MaxInt64), it.fire)
	it.timer.Stop()
	return it
}

// arm starts the deadline of a call.
func (it *interrupter) arm(timeout time.Duration) {
	it.mu.Lock()
	it.armed, it.at = true, time.Now().Add(timeout)
	it.mu.Unlock()
	it.timer.Reset(timeout)
}

// disarm ends the call's deadline and reports whether it fired.
func (it *interrupter) disarm() bool {
	it.timer.Stop()
	it.mu.Lock()
	defer it.mu.Unlock()
	it.armed = false
	return it.fired
}

// fire sets the interrupt global when a call is armed and past its
// deadline. A late run of an earlier call's timer finds the current call
// not yet due and does nothing.
func (it *interrupter) fire() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.armed && !it.fired && !time.Now().Before(it.at) {
		it.fired = true
		it.global.Set(1)
	}
}

func (it *interrupter) stop() { it.timer.Stop() }

// call runs fn on the instance under timeout. It returns an error wrapping
// errDeadline when the deadline stopped the call (or fired as it
// finished: the instance is then unusable either way).
func (in *instance) call(ctx context.Context, fn api.Function, stack []uint64, timeout time.Duration) error {
	if in.interrupt == nil {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		err := fn.CallWithStack(cctx, stack)
		var exit *sys.ExitError
		if err != nil && ctx.Err() == nil &&
			((errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded) || cctx.Err() != nil) {
			return fmt.Errorf("%w: %w", errDeadline, err)
		}
		return err
	}
	in.interrupt.arm(timeout)
	err := fn.CallWithStack(ctx, stack)
	if in.interrupt.disarm() {
		if err == nil {
			err = errors.New("finished as the deadline fired")
		}
		return fmt.Errorf("%w: %w", errDeadline, err)
	}
	return err
}
