package interrupt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// testExport is the export name the tests give the interrupt global.
const testExport = "__interrupt"

// guestDir is where TestMain puts the Go guests built for this test binary.
var guestDir string

// compileCache shares compiled modules between the tests' runtimes, so the
// 2 MB Go guest is compiled once per engine and binary.
var compileCache wazero.CompilationCache

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "interrupt-guests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	guestDir = dir
	compileCache = wazero.NewCompilationCache()
	code := m.Run()
	_ = compileCache.Close(context.Background())
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// guestBuild holds the result of building one Go guest once per test binary.
type guestBuild struct {
	once sync.Once
	wasm []byte
	skip string
	err  error
}

var guests = map[string]*guestBuild{"guest": {}}

// goGuest returns the wasip1 reactor built from testdata/<name>, building it
// on first use. It skips the test when the go command cannot target wasip1.
func goGuest(tb testing.TB, name string) []byte {
	tb.Helper()
	g := guests[name]
	g.once.Do(func() { g.wasm, g.skip, g.err = buildGuest(name) })
	if g.skip != "" {
		tb.Skip(g.skip)
	}
	if g.err != nil {
		tb.Fatal(g.err)
	}
	return g.wasm
}

func buildGuest(name string) (wasm []byte, skip string, err error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, "go command not found: cannot build the Go guest " + name, nil
	}
	list, err := exec.Command(goBin, "tool", "dist", "list").Output()
	if err != nil || !bytes.Contains(list, []byte("wasip1/wasm")) {
		return nil, "the go command cannot target wasip1/wasm: Go guest tests skipped", nil
	}
	src, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		return nil, "", err
	}
	out := filepath.Join(guestDir, name+".wasm")
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0",
		"GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("build Go guest %s: %w\n%s", name, err, msg)
	}
	wasm, err = os.ReadFile(out)
	return wasm, "", err
}

// --- Hand assembly of modules ---

// leb is the unsigned LEB128 encoding of v.
func leb(v uint64) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// cat concatenates byte slices.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// vec is a vector: the count followed by the items.
func vec(items ...[]byte) []byte { return cat(append([][]byte{leb(uint64(len(items)))}, items...)...) }

// name is a length-prefixed name.
func name(s string) []byte { return cat(leb(uint64(len(s))), []byte(s)) }

// sec is a section with the given id and content.
func sec(id byte, content ...[]byte) []byte {
	c := cat(content...)
	return cat([]byte{id}, leb(uint64(len(c))), c)
}

// custom is a custom section.
func custom(n string, payload []byte) []byte { return sec(0, name(n), payload) }

// module is a module binary made of the given sections.
// A memory section (one page) is added in its place unless the module has
// one or an import section (which may import one); bareModule adds nothing.
func module(sections ...[]byte) []byte {
	has := false
	at := len(sections)
	for i, s := range sections {
		if len(s) == 0 || int(s[0]) >= len(sectionRank) {
			continue // malformed on purpose
		}
		if s[0] == secMemory || s[0] == secImport {
			has = true
		}
		if s[0] != secCustom && sectionRank[s[0]] > sectionRank[secMemory] && at == len(sections) {
			at = i
		}
	}
	if !has {
		sections = append(sections[:at:at], append([][]byte{sec(secMemory, vec([]byte{0x00, 0x01}))}, sections[at:]...)...)
	}
	return bareModule(sections...)
}

// bareModule is a module of exactly the given sections.
func bareModule(sections ...[]byte) []byte {
	return cat([]byte("\x00asm\x01\x00\x00\x00"), cat(sections...))
}

// body is a function body with no locals and the given instructions (the
// final end is added).
func body(code ...byte) []byte {
	b := cat([]byte{0x00}, code, []byte{0x0b})
	return cat(leb(uint64(len(b))), b)
}

// funcType is a function type.
func funcType(params, results []byte) []byte {
	return cat([]byte{0x60}, leb(uint64(len(params))), params, leb(uint64(len(results))), results)
}

// export is an export entry.
func export(n string, kind byte, idx uint64) []byte { return cat(name(n), []byte{kind}, leb(idx)) }

// checkBytes is the check Instrument inserts for the flag global f (the
// countdown is f+1), spelled out independently of checkSequence.
func checkBytes(f uint64) []byte {
	c := leb(f + 1)
	return cat(
		[]byte{0x23}, c, []byte{0x41, 0x01, 0x6b}, // global.get c; i32.const 1; i32.sub
		[]byte{0x24}, c, // global.set c
		[]byte{0x23}, c, []byte{0x45, 0x04, 0x40}, // global.get c; i32.eqz; if
		[]byte{0x41, 0x80, 0x08, 0x24}, c, // i32.const 1024; global.set c
		[]byte{0x41, 0x00, 0x40, 0x00, 0x1a},                 // i32.const 0; memory.grow 0; drop
		[]byte{0x23}, leb(f), []byte{0x04, 0x40, 0x00, 0x0b}, // global.get f; if; unreachable; end
		[]byte{0x0b}, // end
	)
}

// sectionIDs lists the ids of the sections of a module binary (testing
// helper; the binary is assumed well-framed).
func sectionIDs(tb testing.TB, wasm []byte) []byte {
	tb.Helper()
	var ids []byte
	d := decoder{b: wasm, pos: 8}
	for d.pos < len(wasm) {
		id := wasm[d.pos]
		d.pos++
		n, err := d.u32()
		if err != nil {
			tb.Fatalf("section size: %v", err)
		}
		ids = append(ids, id)
		d.pos += int(n)
	}
	return ids
}

// --- wazero helpers ---

type engineKind int

const (
	compiler engineKind = iota
	interpreter
)

func (e engineKind) String() string { return [...]string{"compiler", "interpreter"}[e] }

// newRuntime returns a runtime of the given engine kind, closed with the test.
func newRuntime(tb testing.TB, kind engineKind, closeOnDone bool) wazero.Runtime {
	tb.Helper()
	cfg := wazero.NewRuntimeConfigCompiler()
	if kind == interpreter {
		cfg = wazero.NewRuntimeConfigInterpreter()
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, cfg.WithCloseOnContextDone(closeOnDone).WithCompilationCache(compileCache))
	tb.Cleanup(func() { _ = r.Close(ctx) })
	return r
}

// startedKey is the context key under which a test passes the channel that
// the "env.started" host function closes.
type startedKey struct{}

// withStarted returns a context whose env.started call closes the returned
// channel.
func withStarted(ctx context.Context) (context.Context, chan struct{}) {
	ch := make(chan struct{})
	return context.WithValue(ctx, startedKey{}, ch), ch
}

// instantiateEnv provides the "env" module with "started", which closes
// the channel found in the call's context, if any.
func instantiateEnv(tb testing.TB, r wazero.Runtime) {
	tb.Helper()
	_, err := r.NewHostModuleBuilder("env").
		NewFunctionBuilder().
		WithFunc(func(ctx context.Context) {
			if ch, ok := ctx.Value(startedKey{}).(chan struct{}); ok {
				close(ch)
			}
		}).
		Export("started").
		Instantiate(context.Background())
	if err != nil {
		tb.Fatalf("instantiate env: %v", err)
	}
}

// instantiateGuest instantiates a Go guest (with WASI and env) in r and runs
// _initialize.
func instantiateGuest(tb testing.TB, r wazero.Runtime, wasm []byte) api.Module {
	tb.Helper()
	ctx := context.Background()
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	instantiateEnv(tb, r)
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		tb.Fatalf("compile guest: %v", err)
	}
	mod, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
	if err != nil {
		tb.Fatalf("instantiate guest: %v", err)
	}
	return mod
}

// interruptGlobal returns the instrumented module's interrupt global.
func interruptGlobal(tb testing.TB, mod api.Module) api.MutableGlobal {
	tb.Helper()
	g, ok := mod.ExportedGlobal(testExport).(api.MutableGlobal)
	if !ok {
		tb.Fatalf("export %q is not a mutable global", testExport)
	}
	if g.Type() != api.ValueTypeI32 {
		tb.Fatalf("interrupt global type = %v, want i32", api.ValueTypeName(g.Type()))
	}
	return g
}

// isUnreachable reports whether err is wazero's unreachable trap.
func isUnreachable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "unreachable")
}

// moduleConfig is a module config with the given module name ("" for an
// anonymous module, which may be instantiated many times) and no start
// functions besides the wasm start section.
func moduleConfig(name string) wazero.ModuleConfig {
	return wazero.NewModuleConfig().WithName(name).WithStartFunctions()
}
