// Package plugins hosts Breakwater's WebAssembly plugins on wazero: it
// compiles each plugin once (through a shared compilation cache), checks
// its exports against the plugins/abi contract at load, pools instances
// (one instance pinned to one call), bounds each instance's memory and each
// call's time, and runs the restate, classify, on_request and route hooks
// for the gateway. A plugin that traps, overruns its deadline or answers garbage is
// counted, logged and skipped: the hook returns false and the caller uses
// its built-in decision.
package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/redact"
	"github.com/breakwater-dev/breakwater/internal/regfile"
)

// Defaults of Options.
const (
	// DefaultMemoryLimitPages caps an instance's linear memory at 16 MiB.
	DefaultMemoryLimitPages = 256
	// DefaultCallTimeout is the deadline of one hook call.
	DefaultCallTimeout = 50 * time.Millisecond
)

// MaxPluginBytes bounds a plugin's .wasm file. A path that is not a
// regular file (a device, a named pipe) or a larger file fails to load at
// once (see regfile.Read).
const MaxPluginBytes = 64 << 20

// instantiateTimeout bounds creating one instance (the guest's runtime
// initialisation, _initialize); it is not part of a call's deadline.
const instantiateTimeout = 10 * time.Second

// Options configures a Host. The zero value of every field selects its
// default.
type Options struct {
	// Logger is the parent of every plugin's logger ("plugin.<name>");
	// nil discards logs.
	Logger hclog.Logger
	// CacheDir keeps compiled plugins on disk across restarts; "" keeps
	// them in memory for the Host's lifetime.
	CacheDir string
	// Store backs the guests' kv_get and kv_set, each plugin under the key
	// prefix "plugin/<name>/"; nil leaves KV unavailable (a guest that
	// requires abi.FeatureKV then fails to load).
	Store engine.Store
	// Clock is the guests' now_ms and WASI wall clock, and stamps
	// Status.LoadedAt; nil is the system clock.
	Clock engine.Clock
	// MemoryLimitPages caps each instance's linear memory, in 64 KiB pages
	// (default DefaultMemoryLimitPages).
	MemoryLimitPages uint32
	// CallTimeout is the deadline of one hook call on one plugin (default
	// DefaultCallTimeout). An instance that overruns it is closed.
	CallTimeout time.Duration
	// MaxIdleInstances is how many idle instances each plugin keeps for
	// reuse (default GOMAXPROCS). More are created under load and closed
	// when returned to a full pool.
	MaxIdleInstances int
	// Redactor removes configured credentials from guest log lines and
	// plugin errors (guests see upstream error bodies, which may echo a
	// credential); nil removes key-shaped tokens only.
	Redactor *redact.Redactor
}

// Spec is one configured plugin (config: plugins[]).
type Spec struct {
	// Name identifies the plugin in logs, status and its KV namespace.
	Name string
	// Path is the .wasm file.
	Path string
	// Hooks are the hooks to run it for ("restate", "classify",
	// "on_request", "route"); empty means every hook the guest declares.
	Hooks []string
}

// Status describes one loaded plugin for GET /api/plugins.
type Status struct {
	Name       string   `json:"name"`
	Path       string   `json:"path"`
	SHA256     string   `json:"sha256"`
	Hooks      []string `json:"hooks"`
	ABIVersion string   `json:"abi_version"`
	Features   []string `json:"features"`
	// Encoding is how hook data is exchanged: "binary" or "JSON".
	Encoding string `json:"encoding"`
	// Deadline is how call deadlines are enforced: "instrumented" (cheap
	// checks injected at load) or "runtime" (wazero's, several times
	// slower; used when the module cannot be instrumented).
	Deadline string `json:"deadline"`
	Calls    uint64 `json:"calls"`
	Errors   uint64 `json:"errors"`
	// LogsDropped counts guest log lines dropped by the per-call bound
	// (MaxLogLinesPerCall) or the plugin's rate (LogBurst,
	// LogLinesPerSecond).
	LogsDropped uint64    `json:"logs_dropped"`
	P99Micros   int64     `json:"p99_us"`
	LoadedAt    time.Time `json:"loaded_at"`
	LastError   string    `json:"last_error,omitempty"`
}

// Host runs the configured plugins. Its hook methods are goroutine-safe and
// lock-free on the plugin set; Load, Reload and Close serialise with each
// other. A nil *Host runs no plugins.
type Host struct {
	log      hclog.Logger
	clock    engine.Clock
	store    engine.Store
	timeout  time.Duration
	maxIdle  int
	redact   *redact.Redactor
	cache    wazero.CompilationCache
	rtConfig wazero.RuntimeConfig

	mu       sync.Mutex            // serialises Load, Reload and Close
	specs    []Spec                // guarded by mu
	closed   bool                  // guarded by mu
	onReload func(context.Context) // guarded by mu; see OnReload

	set atomic.Pointer[pluginSet]
}

// pluginSet is an immutable snapshot of the loaded plugins.
type pluginSet struct {
	all    []*plugin // spec order
	byName map[string]*plugin
	byHook [hookCount][]*plugin
}

func newPluginSet(all []*plugin) *pluginSet {
	s := &pluginSet{all: all, byName: make(map[string]*plugin, len(all))}
	for _, p := range all {
		s.byName[p.name] = p
		for _, h := range p.hooks {
			k, _ := hookKindOf(h)
			s.byHook[k] = append(s.byHook[k], p)
		}
	}
	return s
}

// NewHost returns a Host with no plugins loaded. It fails only when the
// compilation cache directory cannot be used.
func NewHost(_ context.Context, opts Options) (*Host, error) {
	h := &Host{
		log:     opts.Logger,
		clock:   opts.Clock,
		store:   opts.Store,
		timeout: opts.CallTimeout,
		maxIdle: opts.MaxIdleInstances,
		redact:  opts.Redactor,
	}
	if h.log == nil {
		h.log = hclog.NewNullLogger()
	}
	if h.clock == nil {
		h.clock = engine.SystemClock{}
	}
	if h.timeout <= 0 {
		h.timeout = DefaultCallTimeout
	}
	if h.maxIdle <= 0 {
		h.maxIdle = runtime.GOMAXPROCS(0)
	}
	pages := opts.MemoryLimitPages
	if pages == 0 {
		pages = DefaultMemoryLimitPages
	}
	if opts.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("plugins: compilation cache %s: %w", opts.CacheDir, err)
		}
		h.cache = c
	} else {
		h.cache = wazero.NewCompilationCache()
	}
	h.rtConfig = wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(pages).
		WithCompilationCache(h.cache)
	h.set.Store(newPluginSet(nil))
	return h, nil
}

// errClosed is returned by Load and Reload after Close.
var errClosed = errors.New("plugins: host is closed")

// Load makes the loaded plugins match specs, in order: it loads new
// plugins, reloads those whose file content, path or hooks changed, keeps
// the others (with their instances and counters) and unloads plugins no
// longer listed. It is all or nothing: when any spec fails (unreadable
// file, bad exports, ABI mismatch...) the previous set stays in place, the
// failure is recorded as the affected plugin's last error, and the error
// names every failing plugin.
func (h *Host) Load(ctx context.Context, specs []Spec) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errClosed
	}
	if err := checkSpecs(specs); err != nil {
		return err
	}
	if err := h.apply(ctx, specs); err != nil {
		return err
	}
	h.specs = slices.Clone(specs)
	return nil
}

// Reload re-reads every plugin file of the last successful Load and
// reloads those that changed, with Load's all-or-nothing rule. After a
// successful reload it calls the OnReload hook.
func (h *Host) Reload(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return errClosed
	}
	err := h.apply(ctx, h.specs)
	hook := h.onReload
	h.mu.Unlock()
	if err == nil && hook != nil {
		hook(ctx)
	}
	return err
}

// checkSpecs rejects specs without a name or path, duplicate names and
// unknown hooks.
func checkSpecs(specs []Spec) error {
	var errs []error
	seen := make(map[string]bool, len(specs))
	for i, s := range specs {
		switch {
		case s.Name == "":
			errs = append(errs, fmt.Errorf("plugins[%d]: name is required", i))
		case seen[s.Name]:
			errs = append(errs, fmt.Errorf("plugin %q: duplicate name", s.Name))
		case !validName(s.Name):
			errs = append(errs, fmt.Errorf("plugin %q: name must be letters, digits, '.', '_' or '-'", s.Name))
		}
		seen[s.Name] = true
		if s.Path == "" {
			errs = append(errs, fmt.Errorf("plugin %q: path is required", s.Name))
		}
		for _, hook := range s.Hooks {
			if _, ok := hookKindOf(hook); !ok {
				errs = append(errs, fmt.Errorf("plugin %q: unknown hook %q (want %s)",
					s.Name, hook, strings.Join(hookNames[:], ", ")))
			}
		}
	}
	return errors.Join(errs...)
}

// validName reports whether a plugin name is safe in a logger name and a
// KV prefix: ASCII letters, digits, '.', '_' and '-'.
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return s != ""
}

// apply loads specs as Load describes. The caller holds h.mu.
func (h *Host) apply(ctx context.Context, specs []Spec) error {
	old := h.set.Load()
	next := make([]*plugin, len(specs))
	var fresh []*plugin
	var errs []error
	for i, s := range specs {
		cur := old.byName[s.Name]
		bin, err := regfile.Read(s.Path, MaxPluginBytes)
		if err != nil {
			err = fmt.Errorf("plugin %q: read %s: %w", s.Name, s.Path, err)
			errs = append(errs, err)
			cur.setLastError(err)
			continue
		}
		sum := sha256.Sum256(bin)
		if cur != nil && cur.path == s.Path && cur.sum == sum && slices.Equal(cur.specHooks, s.Hooks) {
			next[i] = cur
			continue
		}
		p, err := h.loadPlugin(ctx, s, bin, sum)
		if err != nil {
			errs = append(errs, err)
			cur.setLastError(err)
			continue
		}
		next[i] = p
		fresh = append(fresh, p)
	}
	if len(errs) > 0 {
		for _, p := range fresh {
			p.retire(ctx)
		}
		return errors.Join(errs...)
	}
	set := newPluginSet(next)
	h.set.Store(set)
	for _, p := range fresh {
		verb := "plugin loaded"
		if old.byName[p.name] != nil {
			verb = "plugin reloaded"
		}
		p.log.Info(verb, "path", p.path, "sha256", hex.EncodeToString(p.sum[:8]),
			"hooks", p.hooks, "abi", p.abiVersion(), "features", p.features.String())
	}
	for _, p := range old.all {
		if set.byName[p.name] != p {
			p.retire(ctx)
			if set.byName[p.name] == nil {
				p.log.Info("plugin unloaded", "path", p.path)
			}
		}
	}
	return nil
}

// List returns the status of every loaded plugin, in spec order.
func (h *Host) List() []Status {
	if h == nil {
		return nil
	}
	set := h.set.Load()
	out := make([]Status, 0, len(set.all))
	for _, p := range set.all {
		out = append(out, p.status())
	}
	return out
}

// Close unloads every plugin, waiting for calls in flight, and releases the
// compilation cache. Hooks return false afterwards; it is safe to call more
// than once.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	old := h.set.Swap(newPluginSet(nil))
	for _, p := range old.all {
		p.retire(ctx)
	}
	if err := h.cache.Close(ctx); err != nil {
		return fmt.Errorf("plugins: close compilation cache: %w", err)
	}
	return nil
}

func (p *plugin) abiVersion() string {
	return strconv.Itoa(int(p.major)) + "." + strconv.Itoa(int(p.minor))
}
