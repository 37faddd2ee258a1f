package plugins

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/plugins/interrupt"
	"github.com/breakwater-dev/breakwater/internal/redact"
	"github.com/breakwater-dev/breakwater/plugins/abi"
)

// hookKind indexes the hooks.
type hookKind int

const (
	hookRestate hookKind = iota
	hookClassify
	hookOnRequest
	hookRoute
	hookCount
)

// hookNames and hookExports are indexed by hookKind.
var (
	hookNames   = [hookCount]string{abi.HookRestate, abi.HookClassify, abi.HookOnRequest, abi.HookRoute}
	hookExports = [hookCount]string{abi.ExportRestate, abi.ExportClassify, abi.ExportOnRequest, abi.ExportRoute}
)

func hookKindOf(name string) (hookKind, bool) {
	for k, n := range hookNames {
		if n == name {
			return hookKind(k), true
		}
	}
	return 0, false
}

// plugin is one loaded .wasm file: its own wazero runtime (so the host
// functions know which plugin calls them), its compiled module and a pool
// of instances. Calls hold gate for reading; retire holds it for writing,
// so a retired plugin's instances are never closed under a running call.
type plugin struct {
	name      string
	path      string
	sum       [32]byte
	specHooks []string // as configured
	hooks     []string // effective, canonical order
	log       hclog.Logger
	store     engine.Store
	clock     engine.Clock
	timeout   time.Duration

	rt       wazero.Runtime
	compiled wazero.CompiledModule
	modCfg   wazero.ModuleConfig
	major    uint32
	minor    uint32
	features abi.Feature
	loadedAt time.Time

	pool chan *instance

	gate   sync.RWMutex
	closed bool // guarded by gate

	calls   atomic.Uint64
	errors  atomic.Uint64
	lat     latencyWindow
	errLog  errorLogLimiter
	lastErr atomic.Pointer[string]

	// logs bounds the guest's log lines; instances maps each live
	// instance's module to it, for the per-call bound of hostLog.
	logs      logLimiter
	instances sync.Map // api.Module → *instance
	redact    *redact.Redactor

	defaultRuleID string // "plugin.<name>", for answers without a rule id
	instrumented  bool   // deadlines by injected checks (see deadline.go)
}

// binary reports whether the guest exchanges hook data in the binary
// encoding (abi.FeatureBinary) rather than JSON.
func (p *plugin) binary() bool { return p.features&abi.FeatureBinary != 0 }

// encodingName names the guest's encoding for errors and the status API.
func (p *plugin) encodingName() string {
	if p.binary() {
		return "binary"
	}
	return "JSON"
}

// instance is one instantiated module. It is used by one call at a time.
type instance struct {
	mod    api.Module
	mem    api.Memory
	alloc  api.Function
	hooks  [hookCount]api.Function
	buf    uint32 // guest buffer from breakwater_alloc, 0 until allocated
	bufCap uint32
	stack  [2]uint64
	stdout *lineWriter
	stderr *lineWriter
	// interrupt enforces call deadlines on instrumented guests; nil when
	// the runtime's own checks do.
	interrupt *interrupter
	// logLines counts the lines logged by the current call (guestLine).
	logLines int
	// forget removes the instance from its plugin's instances.
	forget func()
}

// baseExports are required of every guest.
var baseExports = []string{abi.ExportVersionMajor, abi.ExportVersionMinor, abi.ExportFeatures, abi.ExportAlloc}

// loadPlugin compiles bin, checks it against the ABI and creates its first
// instance. Every error names the plugin.
func (h *Host) loadPlugin(ctx context.Context, s Spec, bin []byte, sum [32]byte) (p *plugin, err error) {
	p = &plugin{
		name:          s.Name,
		defaultRuleID: "plugin." + s.Name,
		path:          s.Path,
		sum:           sum,
		specHooks:     append([]string(nil), s.Hooks...),
		log:           h.log.Named("plugin." + s.Name),
		store:         h.store,
		clock:         h.clock,
		timeout:       h.timeout,
		redact:        h.redact,
		loadedAt:      h.clock.Now(),
		pool:          make(chan *instance, h.maxIdle),
	}
	loading := p // p is nil in the deferred call after an error return
	defer func() {
		if err != nil {
			if loading.rt != nil {
				_ = loading.rt.Close(ctx)
			}
			err = fmt.Errorf("plugin %q (%s): %w", s.Name, s.Path, err)
		}
	}()
	patched, ierr := interrupt.Instrument(bin, interruptExport)
	if ierr == nil {
		ierr = p.compile(ctx, h.rtConfig.WithCloseOnContextDone(false), patched)
	}
	if ierr == nil {
		p.instrumented = true
	} else {
		p.log.Warn("cannot instrument the module for cheap deadline checks; using the runtime's (hook calls run several times slower)", "error", ierr)
		if err := p.compile(ctx, h.rtConfig, bin); err != nil {
			return nil, err
		}
	}
	if err := checkModule(p.compiled); err != nil {
		return nil, err
	}
	p.modCfg = wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // _initialize is called by newInstance, under a deadline
		WithWalltime(p.walltime, sys.ClockResolution(time.Millisecond)).
		WithSysNanotime().
		WithRandSource(rand.Reader)

	inst, err := p.newInstance(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			inst.close(ctx) // before the runtime closes (deferred above)
		}
	}()
	major, minor, features, err := inst.identity(ctx, p.timeout)
	if err != nil {
		return nil, err
	}
	p.major, p.minor, p.features = major, minor, features
	have := abi.FeaturesKnown
	if h.store == nil {
		have &^= abi.FeatureKV
	}
	if p.hooks, err = negotiate(major, features, s.Hooks, have); err != nil {
		return nil, err
	}
	exports := p.compiled.ExportedFunctions()
	for _, hook := range p.hooks {
		k, _ := hookKindOf(hook)
		if err := checkExport(exports, hookExports[k]); err != nil {
			return nil, fmt.Errorf("hook %s: %w", hook, err)
		}
	}
	p.pool <- inst
	return p, nil
}

// compile creates the plugin's runtime with cfg, provides WASI and the
// host module in it, and compiles bin. On failure it closes the runtime.
func (p *plugin) compile(ctx context.Context, cfg wazero.RuntimeConfig, bin []byte) (err error) {
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	defer func() {
		if err != nil {
			_ = rt.Close(ctx)
		}
	}()
	p.rt = rt
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return fmt.Errorf("instantiate WASI: %w", err)
	}
	if err := p.instantiateHostModule(ctx); err != nil {
		return fmt.Errorf("instantiate host module: %w", err)
	}
	if p.compiled, err = rt.CompileModule(ctx, bin); err != nil {
		p.rt = nil
		return fmt.Errorf("compile: %w", err)
	}
	return nil
}

// checkModule checks what can be checked before instantiation: the memory
// export, the base exports' signatures, no _start, and the host imports.
func checkModule(m wazero.CompiledModule) error {
	if _, ok := m.ExportedMemories()[abi.ExportMemory]; !ok {
		return fmt.Errorf("missing export %q (linear memory)", abi.ExportMemory)
	}
	exports := m.ExportedFunctions()
	if _, ok := exports[abi.ExportStart]; ok {
		return fmt.Errorf("exports %q: a WASI command exits after main; build a reactor (go build -buildmode=c-shared)", abi.ExportStart)
	}
	if _, ok := exports[abi.ExportInitialize]; ok {
		if err := checkExport(exports, abi.ExportInitialize); err != nil {
			return err
		}
	}
	for _, name := range baseExports {
		if err := checkExport(exports, name); err != nil {
			return err
		}
	}
	for _, imp := range m.ImportedFunctions() {
		module, name, _ := imp.Import()
		switch module {
		case wasi_snapshot_preview1.ModuleName:
		case abi.ImportModule:
			want, ok := abi.ImportSignature(name)
			if !ok {
				return fmt.Errorf("imports %s.%s, which the host does not provide", module, name)
			}
			if got := signatureOf(imp); !got.Equal(want) {
				return fmt.Errorf("imports %s.%s with signature %s, want %s", module, name, got, want)
			}
		default:
			return fmt.Errorf("imports %s.%s from unknown module %q", module, name, module)
		}
	}
	return nil
}

// checkExport checks that the function export name exists with the
// contract's signature.
func checkExport(exports map[string]api.FunctionDefinition, name string) error {
	want, _ := abi.ExportSignature(name)
	def, ok := exports[name]
	if !ok {
		return fmt.Errorf("missing export %q %s", name, want)
	}
	if got := signatureOf(def); !got.Equal(want) {
		return fmt.Errorf("export %q has signature %s, want %s", name, got, want)
	}
	return nil
}

func signatureOf(def api.FunctionDefinition) abi.Signature {
	return abi.Signature{Params: abiTypes(def.ParamTypes()), Results: abiTypes(def.ResultTypes())}
}

func abiTypes(ts []api.ValueType) []abi.ValueType {
	out := make([]abi.ValueType, len(ts))
	for i, t := range ts {
		out[i] = abi.ValueType(t)
	}
	return out
}

func apiTypes(ts []abi.ValueType) []api.ValueType {
	out := make([]api.ValueType, len(ts))
	for i, t := range ts {
		out[i] = api.ValueType(t)
	}
	return out
}

// negotiate checks a guest's version and features against the host and
// returns the hooks to run: the configured ones, or every hook the guest
// declares when none are configured. have is what the host can serve.
func negotiate(major uint32, features abi.Feature, configured []string, have abi.Feature) ([]string, error) {
	if major != abi.VersionMajor {
		return nil, fmt.Errorf("guest speaks ABI major %d, host speaks %d.%d", major, abi.VersionMajor, abi.VersionMinor)
	}
	if unknown := features &^ abi.FeaturesKnown; unknown != 0 {
		return nil, fmt.Errorf("guest declares features the host does not know: %s", unknown)
	}
	if missing := features &^ have; missing != 0 {
		return nil, fmt.Errorf("guest requires features the host cannot provide: %s", missing)
	}
	var hooks []string
	for _, name := range hookNames {
		bit, _, _ := abi.HookFeature(name)
		if len(configured) == 0 {
			if features&bit != 0 {
				hooks = append(hooks, name)
			}
			continue
		}
		if !slices.Contains(configured, name) {
			continue
		}
		if features&bit == 0 {
			return nil, fmt.Errorf("hook %s is configured but the guest does not implement it (features: %s)", name, features)
		}
		hooks = append(hooks, name)
	}
	if len(hooks) == 0 {
		return nil, fmt.Errorf("guest implements no hook (features: %s)", features)
	}
	return hooks, nil
}

// newInstance instantiates the module and runs _initialize under
// instantiateTimeout.
func (p *plugin) newInstance(ctx context.Context) (*instance, error) {
	in := &instance{}
	in.stdout, in.stderr = newLineWriter(p.guestOutput(in), hclog.Info), newLineWriter(p.guestOutput(in), hclog.Warn)
	ctx = context.WithoutCancel(ctx)
	mod, err := p.rt.InstantiateModule(ctx, p.compiled, p.modCfg.WithStdout(in.stdout).WithStderr(in.stderr))
	if err != nil {
		in.flush()
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	in.mod = mod
	p.instances.Store(mod, in)
	in.forget = func() { p.instances.Delete(mod) }
	in.mem = mod.Memory()
	in.alloc = mod.ExportedFunction(abi.ExportAlloc)
	for k, name := range hookExports {
		in.hooks[k] = mod.ExportedFunction(name)
	}
	if p.instrumented {
		g, ok := mod.ExportedGlobal(interruptExport).(api.MutableGlobal)
		if !ok {
			in.close(ctx)
			return nil, fmt.Errorf("instantiate: the injected global %s is missing", interruptExport)
		}
		in.interrupt = newInterrupter(g)
	}
	if init := mod.ExportedFunction(abi.ExportInitialize); init != nil {
		if err := in.call(ctx, init, nil, instantiateTimeout); err != nil {
			in.close(ctx)
			return nil, fmt.Errorf("instantiate: %s: %w", abi.ExportInitialize, err)
		}
	}
	return in, nil
}

// identity calls the version and feature exports.
func (in *instance) identity(ctx context.Context, timeout time.Duration) (major, minor uint32, features abi.Feature, err error) {
	vals := make([]uint64, 3)
	for i, name := range []string{abi.ExportVersionMajor, abi.ExportVersionMinor, abi.ExportFeatures} {
		stack := vals[i : i+1]
		if err := in.call(ctx, in.mod.ExportedFunction(name), stack, timeout); err != nil {
			return 0, 0, 0, fmt.Errorf("call %s: %w", name, err)
		}
	}
	return uint32(vals[0]), uint32(vals[1]), abi.Feature(vals[2]), nil
}

func (in *instance) close(ctx context.Context) {
	if in.interrupt != nil {
		in.interrupt.stop()
	}
	if in.mod != nil {
		_ = in.mod.Close(context.WithoutCancel(ctx))
	}
	in.flush()
	if in.forget != nil {
		in.forget()
	}
}

func (in *instance) flush() {
	in.stdout.flush()
	in.stderr.flush()
}

// acquire takes an idle instance or creates one.
func (p *plugin) acquire(ctx context.Context) (*instance, error) {
	select {
	case in := <-p.pool:
		return in, nil
	default:
		return p.newInstance(ctx)
	}
}

// release returns a healthy instance to the pool, or closes it when the
// pool is full.
func (p *plugin) release(ctx context.Context, in *instance) {
	select {
	case p.pool <- in:
	default:
		in.close(ctx)
	}
}

// retire stops new calls, waits for those in flight, and closes every
// instance and the runtime. It is idempotent.
func (p *plugin) retire(ctx context.Context) {
	p.gate.Lock()
	defer p.gate.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for drained := false; !drained; {
		select {
		case in := <-p.pool:
			in.close(ctx)
		default:
			drained = true
		}
	}
	_ = p.rt.Close(context.WithoutCancel(ctx))
}

// walltime backs the guests' WASI wall clock with the host clock.
func (p *plugin) walltime() (int64, int32) {
	t := p.clock.Now()
	return t.Unix(), int32(t.Nanosecond())
}

// setLastError records err's first line, redacted, as the plugin's last
// error; a nil plugin ignores it.
func (p *plugin) setLastError(err error) {
	if p == nil || err == nil {
		return
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	msg = p.redact.String(msg)
	p.lastErr.Store(&msg)
}

func (p *plugin) status() Status {
	s := Status{
		Name:        p.name,
		Path:        p.path,
		SHA256:      hex.EncodeToString(p.sum[:]),
		Hooks:       append([]string(nil), p.hooks...),
		ABIVersion:  p.abiVersion(),
		Features:    p.features.Names(),
		Encoding:    p.encodingName(),
		Deadline:    "runtime",
		Calls:       p.calls.Load(),
		Errors:      p.errors.Load(),
		LogsDropped: p.logs.dropped.Load(),
		P99Micros:   p.lat.p99().Microseconds(),
		LoadedAt:    p.loadedAt,
	}
	if p.instrumented {
		s.Deadline = "instrumented"
	}
	if e := p.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}
