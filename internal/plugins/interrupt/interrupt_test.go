package interrupt

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// Value types and other bytes used to assemble test modules.
const (
	i32 = 0x7f
	i64 = 0x7e
)

var (
	voidType     = funcType(nil, nil)
	newFlag      = []byte{0x7f, 0x01, 0x41, 0x00, 0x0b}
	newCountdown = []byte{0x7f, 0x01, 0x41, 0x80, 0x08, 0x0b} // i32.const 1024
)

// bodyLocals is a function body declaring n i32 locals.
func bodyLocals(n byte, code ...byte) []byte {
	b := cat([]byte{0x01, n, i32}, code, []byte{0x0b})
	return cat(leb(uint64(len(b))), b)
}

// sumCode sums the first n (local 0) bytes of memory 0 into local 2, with
// local 1 as the index, and returns the sum.
var sumCode = []byte{
	0x02, 0x40, // block
	0x03, 0x40, // loop
	0x20, 0x01, 0x20, 0x00, 0x4f, 0x0d, 0x01, // br_if 1 (i >= n)
	0x20, 0x02, 0x20, 0x01, 0x2d, 0x00, 0x00, 0x6a, 0x21, 0x02, // acc += mem[i]
	0x20, 0x01, 0x41, 0x01, 0x6a, 0x21, 0x01, // i++
	0x0c, 0x00, // br 0
	0x0b, 0x0b, // end loop, end block
	0x20, 0x02, // acc
}

// loopModule has an import env.started and exports:
//   - "run": calls env.started then loops forever (func 1),
//   - "sum": (n i32) -> i32, sums the first n bytes of memory (func 2),
//   - "id": (x i32) -> i32 without loop (func 3),
//   - "memory".
func loopModule() []byte {
	return module(
		sec(1, vec(voidType, funcType([]byte{i32}, []byte{i32}))),
		sec(2, vec(cat(name("env"), name("started"), []byte{0x00, 0x00}))),
		sec(3, vec([]byte{0x00}, []byte{0x01}, []byte{0x01})),
		sec(5, vec([]byte{0x00, 0x01})),
		sec(7, vec(export("run", 0, 1), export("sum", 0, 2), export("id", 0, 3), export("memory", 2, 0))),
		sec(10, vec(
			body(0x10, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b),
			bodyLocals(2, sumCode...),
			body(0x20, 0x00),
		)),
	)
}

func TestInstrumentExactBytes(t *testing.T) {
	in := module(
		sec(1, vec(voidType)),
		sec(3, vec([]byte{0x00})),
		custom("between", []byte{1, 2, 3}),
		sec(7, vec(export("run", 0, 0))),
		sec(10, vec(body(
			0x03, 0x40, // loop
			0x02, 0x40, 0x03, 0x7f, 0x41, 0x03, 0x0b, 0x1a, 0x0b, // block (loop (result i32) i32.const 3) drop
			0x0c, 0x00, // br 0
			0x0b, // end
		))),
		custom("name", []byte{0x01, 0x04, 0x01, 0x00, 0x01, 'f'}),
	)
	got, err := Instrument(in, testExport)
	if err != nil {
		t.Fatal(err)
	}
	c := checkBytes(0)
	want := module(
		sec(1, vec(voidType)),
		sec(3, vec([]byte{0x00})),
		custom("between", []byte{1, 2, 3}),
		sec(6, vec(newFlag, newCountdown)),
		sec(7, vec(export("run", 0, 0), export(testExport, 3, 0))),
		sec(10, vec(body(cat(
			c, // function entry
			[]byte{0x03, 0x40}, c,
			[]byte{0x02, 0x40, 0x03, 0x7f}, c, []byte{0x41, 0x03, 0x0b, 0x1a, 0x0b},
			[]byte{0x0c, 0x00, 0x0b},
		)...))),
		custom("name", []byte{0x01, 0x04, 0x01, 0x00, 0x01, 'f'}),
	)
	if !bytes.Equal(got, want) {
		t.Fatalf("Instrument:\n got % x\nwant % x", got, want)
	}
	if bytes.Contains(in, c) {
		t.Fatal("input was modified")
	}
}

// TestInterruptHandModule checks the brief's core claim: a tight `loop br 0`
// compiled by wazevo without CloseOnContextDone stops when another goroutine
// sets the global, so the global is re-read on every iteration.
func TestInterruptHandModule(t *testing.T) {
	wasm, err := Instrument(loopModule(), testExport)
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, compiler, false)
	instantiateEnv(t, r)
	mod, err := r.Instantiate(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	runUntilInterrupted(t, mod, "run")
}

// TestInterruptRecursion stops a runaway recursion that enters no loop
// (a naive Fibonacci): the function-entry check point, which wazero's own
// loop-header check lacks.
func TestInterruptRecursion(t *testing.T) {
	fib := []byte{
		0x20, 0x00, 0x41, 0x02, 0x49, // local.get 0; i32.const 2; i32.lt_u
		0x04, i32, // if (result i32)
		0x20, 0x00, // local.get 0
		0x05,                                     // else
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x01, // fib(n-1)
		0x20, 0x00, 0x41, 0x02, 0x6b, 0x10, 0x01, // fib(n-2)
		0x6a, // i32.add
		0x0b, // end
	}
	in := module(
		sec(1, vec(voidType, funcType([]byte{i32}, []byte{i32}))),
		sec(2, vec(cat(name("env"), name("started"), []byte{0x00, 0x00}))),
		sec(3, vec([]byte{0x01}, []byte{0x00})), // 1 fib, 2 run
		sec(5, vec([]byte{0x00, 0x01})),
		sec(7, vec(export("run", 0, 2), export("fib", 0, 1))),
		sec(10, vec(
			body(fib...),
			body(0x10, 0x00, 0x41, 60, 0x10, 0x01, 0x1a), // started(); drop fib(60)
		)),
	)
	wasm, err := Instrument(in, testExport)
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, compiler, false)
	instantiateEnv(t, r)
	mod, err := r.Instantiate(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := mod.ExportedFunction("fib").Call(context.Background(), 20); err != nil || res[0] != 6765 {
		t.Fatalf("fib(20) = %v, %v; want 6765", res, err)
	}
	runUntilInterrupted(t, mod, "run")
}

func TestInterruptGoGuest(t *testing.T) {
	wasm, err := Instrument(goGuest(t, "guest"), testExport)
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, compiler, false)
	mod := instantiateGuest(t, r, wasm)
	runUntilInterrupted(t, mod, "spin")
}

// runUntilInterrupted calls the endless export fn, sets the interrupt
// global 20 ms after the guest reports it started, and requires the call to
// fail with the unreachable trap within 2 s.
func runUntilInterrupted(t *testing.T, mod api.Module, fn string) {
	t.Helper()
	g := interruptGlobal(t, mod)
	if v := g.Get(); v != 0 {
		t.Fatalf("interrupt global starts at %d, want 0", v)
	}
	ctx, started := withStarted(context.Background())
	result := make(chan error, 1)
	go func() {
		_, err := mod.ExportedFunction(fn).Call(ctx)
		result <- err
	}()
	select {
	case <-started:
	case <-time.After(2 * time.Second):
		t.Fatal("guest did not start within 2 s")
	}
	// A spinning guest must not block a stop-the-world: without the
	// slow path's trip into Go this GC (and every timer) would wait for
	// the guest forever, and the test would hang.
	for range 10 {
		runtime.GC()
	}
	set := make(chan time.Time, 1)
	time.AfterFunc(20*time.Millisecond, func() {
		g.Set(1)
		set <- time.Now()
	})
	select {
	case err := <-result:
		setAt := <-set // the call cannot end before the global is set
		if !isUnreachable(err) {
			t.Fatalf("call ended with %v, want the unreachable trap", err)
		}
		if d := time.Since(setAt); d > 2*time.Second {
			t.Fatalf("call ended %v after the global was set", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("call not interrupted within 2 s of starting (guest still spinning)")
	}
}

func TestGlobalStartsAtZeroAndPresetTraps(t *testing.T) {
	wasm, err := Instrument(loopModule(), testExport)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []engineKind{compiler, interpreter} {
		t.Run(kind.String(), func(t *testing.T) {
			ctx := context.Background()
			r := newRuntime(t, kind, false)
			instantiateEnv(t, r)
			mod, err := r.Instantiate(ctx, wasm)
			if err != nil {
				t.Fatal(err)
			}
			if !mod.Memory().Write(0, []byte{1, 2, 3, 4, 250}) {
				t.Fatal("memory write")
			}
			g := interruptGlobal(t, mod)
			if v := g.Get(); v != 0 {
				t.Fatalf("interrupt global starts at %d, want 0", v)
			}
			sum := mod.ExportedFunction("sum")
			id := mod.ExportedFunction("id")
			res, err := sum.Call(ctx, 5)
			if err != nil || res[0] != 260 {
				t.Fatalf("sum(5) = %v, %v; want 260", res, err)
			}
			g.Set(1)
			// The flag is read on the slow path, at least every
			// CheckInterval iterations.
			if _, err := sum.Call(ctx, 2*CheckInterval); !isUnreachable(err) {
				t.Fatalf("sum over %d bytes with global 1: err = %v, want unreachable trap", 2*CheckInterval, err)
			}
			if res, err := id.Call(ctx, 42); err != nil || res[0] != 42 {
				t.Fatalf("loop-free id(42) with global 1 = %v, %v; want 42", res, err)
			}
			g.Set(0)
			if res, err := sum.Call(ctx, 3); err != nil || res[0] != 6 {
				t.Fatalf("sum(3) after reset = %v, %v; want 6", res, err)
			}
		})
	}
}

func TestImportedGlobals(t *testing.T) {
	ctx := context.Background()
	// Module "a" exports an immutable i32 (5) and a mutable i64 (7).
	provider := module(
		sec(6, vec([]byte{i32, 0x00, 0x41, 0x05, 0x0b}, []byte{i64, 0x01, 0x42, 0x07, 0x0b})),
		sec(7, vec(export("g0", 3, 0), export("g1", 3, 1))),
	)
	// The user imports both, defines an i32 (9) and loops "n" times.
	user := module(
		sec(1, vec(funcType([]byte{i32}, []byte{i32}))),
		sec(2, vec(
			cat(name("a"), name("g0"), []byte{0x03, i32, 0x00}),
			cat(name("a"), name("g1"), []byte{0x03, i64, 0x01}),
		)),
		sec(3, vec([]byte{0x00})),
		sec(5, vec([]byte{0x00, 0x01})),
		sec(6, vec([]byte{i32, 0x00, 0x41, 0x09, 0x0b})),
		sec(7, vec(export("count", 0, 0))),
		sec(10, vec(bodyLocals(1,
			0x03, 0x40, // loop: i++; br_if i < n
			0x20, 0x01, 0x41, 0x01, 0x6a, 0x22, 0x01,
			0x20, 0x00, 0x48, 0x0d, 0x00,
			0x0b,
			0x20, 0x01,
		))),
	)
	wasm, err := Instrument(user, testExport)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(wasm, checkBytes(3)) || !bytes.Contains(wasm, export(testExport, 3, 3)) {
		t.Fatal("interrupt global does not get index 3 (2 imported + 1 defined)")
	}
	if !bytes.Contains(wasm, cat([]byte{6}, leb(17), []byte{3, i32, 0x00, 0x41, 0x09, 0x0b}, newFlag, newCountdown)) {
		t.Fatal("global section does not hold the defined global followed by the new one")
	}
	for _, kind := range []engineKind{compiler, interpreter} {
		t.Run(kind.String(), func(t *testing.T) {
			r := newRuntime(t, kind, false)
			if _, err := r.InstantiateWithConfig(ctx, provider, moduleConfig("a")); err != nil {
				t.Fatal(err)
			}
			mod, err := r.Instantiate(ctx, wasm)
			if err != nil {
				t.Fatal(err)
			}
			g := interruptGlobal(t, mod)
			count := mod.ExportedFunction("count")
			if res, err := count.Call(ctx, 1000); err != nil || res[0] != 1000 {
				t.Fatalf("count(1000) = %v, %v; want 1000", res, err)
			}
			g.Set(1)
			if _, err := count.Call(ctx, 2*CheckInterval); !isUnreachable(err) {
				t.Fatalf("count with global 1: err = %v, want unreachable trap", err)
			}
		})
	}
}

func TestCreatesSectionsInOrder(t *testing.T) {
	code := sec(10, vec(body(0x03, 0x40, 0x0b)))
	tests := []struct {
		name string
		in   []byte
		ids  []byte // section ids of the output
	}{
		{"empty module", module(), []byte{5, 6, 7}},
		{"functions only", module(sec(1, vec(voidType)), sec(3, vec([]byte{0})), code), []byte{1, 3, 5, 6, 7, 10}},
		{"after tag, before start", module(
			sec(1, vec(voidType)), sec(3, vec([]byte{0})), sec(13, vec([]byte{0, 0})), sec(8, []byte{0}), code,
		), []byte{1, 3, 5, 13, 6, 7, 8, 10}},
		{"global present, export absent", module(
			sec(1, vec(voidType)), sec(3, vec([]byte{0})), sec(6, vec([]byte{i32, 0, 0x41, 1, 0x0b})), code,
		), []byte{1, 3, 5, 6, 7, 10}},
		{"export present, global absent", module(
			sec(1, vec(voidType)), sec(3, vec([]byte{0})), sec(7, vec(export("f", 0, 0))), code,
		), []byte{1, 3, 5, 6, 7, 10}},
		{"custom sections stay in place", module(
			custom("a", []byte{1}), sec(1, vec(voidType)), custom("b", []byte{2}), sec(3, vec([]byte{0})),
			custom("c", []byte{3}), code, custom("d", []byte{4}),
		), []byte{0, 1, 0, 3, 0, 5, 6, 7, 10, 0}},
		{"memory and data", module(
			sec(5, vec([]byte{0, 1})), sec(11, vec(cat([]byte{0, 0x41, 0, 0x0b}, name("hi")))),
		), []byte{5, 6, 7, 11}},
	}
	r := newRuntime(t, compiler, false)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Instrument(tt.in, testExport)
			if err != nil {
				t.Fatal(err)
			}
			if ids := sectionIDs(t, out); !bytes.Equal(ids, tt.ids) {
				t.Fatalf("section ids = %v, want %v", ids, tt.ids)
			}
			if bytes.Contains(tt.ids, []byte{13}) {
				return // tags need wazero's exception handling feature
			}
			mod, err := r.InstantiateWithConfig(context.Background(), out, moduleConfig(""))
			if err != nil {
				t.Fatalf("instrumented module: %v", err)
			}
			if g := interruptGlobal(t, mod); g.Get() != 0 {
				t.Fatal("interrupt global not 0")
			}
		})
	}
}

func TestDebugSectionsDropped(t *testing.T) {
	nameSec := custom("name", []byte{0x01, 0x04, 0x01, 0x00, 0x01, 'f'})
	in := module(
		sec(1, vec(voidType)), sec(3, vec([]byte{0})),
		sec(10, vec(body(0x03, 0x40, 0x0b))),
		custom(".debug_info", []byte{1, 2, 3}), custom(".debug_line", []byte{4}),
		nameSec, custom("producers", []byte{0}), custom("debug", []byte{9}),
	)
	out, err := Instrument(in, testExport)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(".debug")) {
		t.Fatal(".debug* sections kept")
	}
	if !bytes.HasSuffix(out, cat(nameSec, custom("producers", []byte{0}), custom("debug", []byte{9}))) {
		t.Fatal("other custom sections not kept unchanged and in order")
	}
}

func TestExportNameCollision(t *testing.T) {
	in := module(sec(1, vec(voidType)), sec(3, vec([]byte{0})),
		sec(7, vec(export("f", 0, 0), export(testExport, 0, 0))), sec(10, vec(body())))
	_, err := Instrument(in, testExport)
	if err == nil || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("err = %v, want export name collision", err)
	}
	if _, err := Instrument(in, "other"); err != nil {
		t.Fatalf("other name: %v", err)
	}
	if _, err := Instrument(in, "\xff"); err == nil {
		t.Fatal("invalid UTF-8 export name accepted")
	}
}

func TestMalformed(t *testing.T) {
	types := sec(1, vec(voidType))
	funcs := sec(3, vec([]byte{0}))
	withBody := func(b []byte) []byte { return module(types, funcs, sec(10, vec(b))) }
	rawBody := func(b ...byte) []byte { return cat(leb(uint64(len(b))), b) }
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "unexpected end"},
		{"short header", []byte("\x00asm\x01"), "unexpected end"},
		{"bad magic", []byte("\x00wasm\x01\x00\x00\x00"), "magic"},
		{"bad version", []byte("\x00asm\x02\x00\x00\x00"), "version"},
		{"section past end", cat(module(), []byte{1, 5, 0}), "unexpected end"},
		{"section size truncated", cat(module(), []byte{1, 0x80}), "unexpected end"},
		{"section size too long", cat(module(), []byte{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}), "out of range"},
		{"unknown section", module(sec(14, nil)), "unknown section id"},
		{"out of order", module(funcs, types), "out of order"},
		{"duplicate", module(types, types), "duplicate"},
		{"custom name past end", module(sec(0, []byte{5, 'a'})), "unexpected end"},
		{"import kind", module(sec(2, vec(cat(name("m"), name("f"), []byte{0x05, 0})))), "unknown import kind"},
		{"import trailing bytes", module(sec(2, cat(vec(), []byte{0}))), "unexpected bytes"},
		{"import bad value type", module(sec(2, vec(cat(name("m"), name("g"), []byte{0x03, 0x01, 0})))), "value type"},
		{"export kind", module(sec(7, vec(cat(name("e"), []byte{0x09, 0})))), "unknown export kind"},
		{"too many globals", module(sec(6, cat(leb(3), []byte{i32, 0, 0x41, 0, 0x0b}))), "do not fit"},
		{"function count mismatch", module(types, funcs), "1 functions but code section has 0"},
		{"body past section", module(types, funcs, sec(10, []byte{1, 5, 0})), "unexpected end"},
		{"unknown opcode", withBody(body(0x27)), "unknown opcode 0x27"},
		{"unknown GC prefix", withBody(body(0xfb, 0x00)), "unknown opcode 0xfb"},
		{"unknown 0xfc", withBody(body(0xfc, 0x12)), "unknown opcode 0xfc"},
		{"reserved simd", withBody(body(0xfd, 0x9a, 0x01)), "unknown opcode 0xfd"},
		{"unknown simd", withBody(body(0xfd, 0x94, 0x02)), "unknown opcode 0xfd"},
		{"unknown atomic", withBody(body(0xfe, 0x04)), "unknown opcode 0xfe"},
		{"missing end", withBody(rawBody(0x00, 0x01)), "missing end"},
		{"unclosed loop", withBody(rawBody(0x00, 0x03, 0x40, 0x0b)), "missing end"},
		{"bytes after end", withBody(rawBody(0x00, 0x0b, 0x01)), "after end"},
		{"truncated immediate", withBody(rawBody(0x00, 0x41)), "unexpected end"},
		{"truncated f64", withBody(rawBody(0x00, 0x44, 0, 0, 0, 0x0b)), "unexpected end"},
		{"negative block type", withBody(body(0x02, 0x45, 0x0b)), "block type"},
		{"bad local type", withBody(rawBody(0x01, 0x01, 0x00, 0x0b)), "value type"},
		{"catch clause", withBody(body(0x1f, 0x40, 0x01, 0x04, 0x0b)), "catch clause"},
		{"delegate at top", withBody(rawBody(0x00, 0x18, 0x00)), "delegate outside try"},
		{"br_table count past end", withBody(rawBody(0x00, 0x0e, 0xff, 0xff, 0xff, 0xff, 0x0f)), "unexpected end"},
		{"overlong i32.const", withBody(body(0x41, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00)), "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Instrument(tt.in, testExport)
			if err == nil {
				t.Fatalf("no error; output % x", out)
			}
			if out != nil {
				t.Fatal("output with error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %q, want it to mention %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "interrupt: ") {
				t.Fatalf("err = %q lacks the package prefix", err)
			}
		})
	}
}

// TestTruncatedPrefixes cuts a valid module at every byte that is not a
// section boundary: each prefix must be rejected.
func TestTruncatedPrefixes(t *testing.T) {
	in := loopModule()
	boundaries := map[int]bool{8: true}
	d := decoder{b: in, pos: 8}
	for d.pos < len(in) {
		d.pos++
		n, _ := d.u32()
		d.pos += int(n)
		boundaries[d.pos] = true
	}
	for n := 0; n < len(in); n++ {
		_, err := Instrument(in[:n], testExport)
		if boundaries[n] {
			continue // a well-framed (if incomplete) module
		}
		if err == nil {
			t.Errorf("prefix of %d bytes accepted", n)
		}
	}
}

// TestInstructionImmediates puts each instruction before a loop in a body
// and checks the check lands right after the loop: any mis-sized immediate
// would move it or fail. Immediates contain 0x03 (loop) bytes where possible
// so that reading too little finds a false loop.
func TestInstructionImmediates(t *testing.T) {
	memarg := []byte{0x03, 0x83, 0x03}      // align 3, offset 0x183
	memargIdx := []byte{0x43, 0x03, 0x03}   // align 3 with memory index 3, offset 3
	lanes := bytes.Repeat([]byte{0x03}, 16) // 16 immediate bytes
	tests := []struct {
		name  string
		instr []byte
		depth int // control frames the instruction opens
	}{
		{"unreachable", []byte{0x00}, 0},
		{"block empty", []byte{0x02, 0x40}, 1},
		{"block i32", []byte{0x02, 0x7f}, 1},
		{"block type index", []byte{0x02, 0x03}, 1},
		{"block type index 2 bytes", []byte{0x02, 0x83, 0x03}, 1},
		{"block ref null func", []byte{0x02, 0x63, 0x70}, 1},
		{"block ref type index", []byte{0x02, 0x64, 0x03}, 1},
		{"if v128", []byte{0x04, 0x7b}, 1},
		{"if else", []byte{0x04, 0x40, 0x05}, 1},
		{"legacy try catch", []byte{0x06, 0x40, 0x07, 0x03}, 1},
		{"legacy try catch_all", []byte{0x06, 0x40, 0x19}, 1},
		{"legacy try delegate", []byte{0x06, 0x40, 0x18, 0x03}, 0},
		{"legacy rethrow", []byte{0x09, 0x03}, 0},
		{"throw", []byte{0x08, 0x83, 0x03}, 0},
		{"throw_ref", []byte{0x0a}, 0},
		{"br", []byte{0x0c, 0x03}, 0},
		{"br_if", []byte{0x0d, 0x03}, 0},
		{"br_table", []byte{0x0e, 0x02, 0x03, 0x83, 0x03, 0x03}, 0},
		{"return", []byte{0x0f}, 0},
		{"call", []byte{0x10, 0x83, 0x03}, 0},
		{"call_indirect", []byte{0x11, 0x03, 0x03}, 0},
		{"return_call", []byte{0x12, 0x03}, 0},
		{"return_call_indirect", []byte{0x13, 0x03, 0x03}, 0},
		{"call_ref", []byte{0x14, 0x03}, 0},
		{"return_call_ref", []byte{0x15, 0x03}, 0},
		{"drop select", []byte{0x1a, 0x1b}, 0},
		{"select t", []byte{0x1c, 0x02, 0x7f, 0x63, 0x03}, 0},
		{"try_table", []byte{0x1f, 0x40, 0x04, 0x00, 0x03, 0x03, 0x01, 0x03, 0x03, 0x02, 0x03, 0x03, 0x03}, 1},
		{"local.get", []byte{0x20, 0x03}, 0},
		{"local.set", []byte{0x21, 0x83, 0x03}, 0},
		{"local.tee", []byte{0x22, 0x03}, 0},
		{"global.get", []byte{0x23, 0x03}, 0},
		{"global.set", []byte{0x24, 0x03}, 0},
		{"table.get", []byte{0x25, 0x03}, 0},
		{"table.set", []byte{0x26, 0x03}, 0},
		{"i32.load", cat([]byte{0x28}, memarg), 0},
		{"i64.store32 multi-memory", cat([]byte{0x3e}, memargIdx), 0},
		{"memory.size", []byte{0x3f, 0x03}, 0},
		{"memory.grow", []byte{0x40, 0x00}, 0},
		{"i32.const", []byte{0x41, 0x83, 0x03}, 0},
		{"i64.const", []byte{0x42, 0x83, 0x83, 0x83, 0x83, 0x83, 0x83, 0x83, 0x83, 0x03}, 0},
		{"f32.const", []byte{0x43, 0x03, 0x03, 0x03, 0x03}, 0},
		{"f64.const", []byte{0x44, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03}, 0},
		{"numeric", []byte{0x45, 0x6a, 0xa7, 0xbf, 0xc0, 0xc4}, 0},
		{"ref.null func", []byte{0xd0, 0x70}, 0},
		{"ref.null index", []byte{0xd0, 0x03}, 0},
		{"ref.is_null ref.eq ref.as_non_null", []byte{0xd1, 0xd3, 0xd4}, 0},
		{"ref.func", []byte{0xd2, 0x03}, 0},
		{"br_on_null", []byte{0xd5, 0x03}, 0},
		{"br_on_non_null", []byte{0xd6, 0x03}, 0},
		{"i32.trunc_sat_f32_s", []byte{0xfc, 0x00}, 0},
		{"i64.trunc_sat_f64_u", []byte{0xfc, 0x07}, 0},
		{"memory.init", []byte{0xfc, 0x08, 0x03, 0x00}, 0},
		{"data.drop", []byte{0xfc, 0x09, 0x03}, 0},
		{"memory.copy", []byte{0xfc, 0x0a, 0x00, 0x03}, 0},
		{"memory.fill", []byte{0xfc, 0x0b, 0x03}, 0},
		{"table.init", []byte{0xfc, 0x0c, 0x03, 0x03}, 0},
		{"elem.drop", []byte{0xfc, 0x0d, 0x03}, 0},
		{"table.copy", []byte{0xfc, 0x0e, 0x03, 0x03}, 0},
		{"table.grow", []byte{0xfc, 0x0f, 0x03}, 0},
		{"table.size", []byte{0xfc, 0x10, 0x03}, 0},
		{"table.fill", []byte{0xfc, 0x11, 0x03}, 0},
		{"v128.load", cat([]byte{0xfd, 0x00}, memarg), 0},
		{"v128.load64_splat", cat([]byte{0xfd, 0x0a}, memarg), 0},
		{"v128.store", cat([]byte{0xfd, 0x0b}, memargIdx), 0},
		{"v128.const", cat([]byte{0xfd, 0x0c}, lanes), 0},
		{"i8x16.shuffle", cat([]byte{0xfd, 0x0d}, lanes), 0},
		{"i8x16.swizzle", []byte{0xfd, 0x0e}, 0},
		{"f64x2.splat", []byte{0xfd, 0x14}, 0},
		{"i8x16.extract_lane_s", []byte{0xfd, 0x15, 0x03}, 0},
		{"f64x2.replace_lane", []byte{0xfd, 0x22, 0x03}, 0},
		{"i8x16.eq", []byte{0xfd, 0x23}, 0},
		{"v128.any_true", []byte{0xfd, 0x53}, 0},
		{"v128.load8_lane", cat([]byte{0xfd, 0x54}, memarg, []byte{0x03}), 0},
		{"v128.store64_lane", cat([]byte{0xfd, 0x5b}, memargIdx, []byte{0x03}), 0},
		{"v128.load32_zero", cat([]byte{0xfd, 0x5c}, memarg), 0},
		{"v128.load64_zero", cat([]byte{0xfd, 0x5d}, memarg), 0},
		{"f32x4.demote_f64x2_zero", []byte{0xfd, 0x5e}, 0},
		{"i16x8.q15mulr_sat_s", []byte{0xfd, 0x82, 0x01}, 0},
		{"i32x4.dot_i16x8_s", []byte{0xfd, 0xba, 0x01}, 0},
		{"f64x2.convert_low_i32x4_u", []byte{0xfd, 0xff, 0x01}, 0},
		{"i8x16.relaxed_swizzle", []byte{0xfd, 0x80, 0x02}, 0},
		{"relaxed dot add", []byte{0xfd, 0x93, 0x02}, 0},
		{"memory.atomic.notify", cat([]byte{0xfe, 0x00}, memarg), 0},
		{"memory.atomic.wait64", cat([]byte{0xfe, 0x02}, memarg), 0},
		{"atomic.fence", []byte{0xfe, 0x03, 0x00}, 0},
		{"i32.atomic.load", cat([]byte{0xfe, 0x10}, memarg), 0},
		{"i64.atomic.rmw32.cmpxchg_u", cat([]byte{0xfe, 0x4e}, memargIdx), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ends := bytes.Repeat([]byte{0x0b}, tt.depth)
			in := module(sec(1, vec(voidType)), sec(3, vec([]byte{0})),
				sec(10, vec(body(cat(tt.instr, []byte{0x03, 0x40, 0x0b}, ends)...))))
			out, err := Instrument(in, testExport)
			if err != nil {
				t.Fatal(err)
			}
			want := body(cat(checkBytes(0), tt.instr, []byte{0x03, 0x40}, checkBytes(0), []byte{0x0b}, ends)...)
			if !bytes.Contains(out, cat([]byte{10}, leb(uint64(len(want)+1)), []byte{1}, want)) {
				t.Fatalf("code section does not hold the expected body % x\noutput % x", want, out)
			}
		})
	}
}

func TestManyLoopsAndLargeIndex(t *testing.T) {
	// 200 globals give the new global a two-byte index; 100 nested loops and
	// a body over 128 bytes need multi-byte sizes.
	var globals [][]byte
	for i := 0; i < 200; i++ {
		globals = append(globals, []byte{i32, 0x00, 0x41, 0x00, 0x0b})
	}
	var code []byte
	for i := 0; i < 100; i++ {
		code = append(code, 0x03, 0x40)
	}
	code = append(code, bytes.Repeat([]byte{0x0b}, 100)...)
	in := module(sec(1, vec(voidType)), sec(3, vec([]byte{0})), sec(6, vec(globals...)),
		sec(7, vec(export("f", 0, 0))), sec(10, vec(body(code...))))
	out, err := Instrument(in, testExport)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(out, checkBytes(200)); n != 101 {
		t.Fatalf("%d checks for global 200, want 101 (the entry and 100 loops)", n)
	}
	r := newRuntime(t, compiler, false)
	mod, err := r.Instantiate(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mod.ExportedFunction("f").Call(context.Background()); err != nil {
		t.Fatal(err)
	}
	interruptGlobal(t, mod).Set(1)
	// Each call enters 100 loops; the flag is read within CheckInterval
	// loop entries.
	var err2 error
	calls := 0
	for calls < CheckInterval/100+1 && err2 == nil {
		_, err2 = mod.ExportedFunction("f").Call(context.Background())
		calls++
	}
	if !isUnreachable(err2) {
		t.Fatalf("after %d calls: err = %v, want unreachable trap", calls, err2)
	}
}

func TestGoGuestEquivalence(t *testing.T) {
	ctx := context.Background()
	plainWasm := goGuest(t, "guest")
	instrumented, err := Instrument(plainWasm, testExport)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(plainWasm, instrumented) || len(instrumented) <= len(plainWasm) {
		t.Fatal("instrumentation changed nothing")
	}
	// The interpreter validates the instrumented guest too.
	ri := newRuntime(t, interpreter, false)
	if _, err := ri.CompileModule(ctx, instrumented); err != nil {
		t.Fatalf("interpreter rejects the instrumented guest: %v", err)
	}

	plain := instantiateGuest(t, newRuntime(t, compiler, false), plainWasm)
	inst := instantiateGuest(t, newRuntime(t, compiler, false), instrumented)
	if g := interruptGlobal(t, inst); g.Get() != 0 {
		t.Fatal("interrupt global not 0")
	}
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i*7 + i/256)
	}
	for _, mod := range []api.Module{plain, inst} {
		ptr, err := mod.ExportedFunction("buf_ptr").Call(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !mod.Memory().Write(uint32(ptr[0]), data) {
			t.Fatal("write guest buffer")
		}
	}
	var wantSum uint64
	for _, c := range data {
		wantSum += uint64(c)
	}
	seen := map[string]map[uint64]bool{}
	for _, fn := range []string{"sum", "str_work", "map_work", "alloc_work", "sort_work"} {
		seen[fn] = map[uint64]bool{}
		for _, n := range []uint64{0, 1, 17, 500, 4096} {
			want, err1 := plain.ExportedFunction(fn).Call(ctx, n)
			got, err2 := inst.ExportedFunction(fn).Call(ctx, n)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s(%d): plain err %v, instrumented err %v", fn, n, err1, err2)
			}
			if got[0] != want[0] {
				t.Fatalf("%s(%d) = %#x instrumented, %#x plain", fn, n, got[0], want[0])
			}
			seen[fn][got[0]] = true
		}
		if len(seen[fn]) < 4 { // the results depend on the input
			t.Fatalf("%s gives only %d distinct results over 5 inputs", fn, len(seen[fn]))
		}
	}
	if res, _ := inst.ExportedFunction("sum").Call(ctx, 4096); res[0] != wantSum {
		t.Fatalf("sum(4096) = %d, want %d", res[0], wantSum)
	}
	interruptGlobal(t, inst).Set(1)
	if _, err := inst.ExportedFunction("sum").Call(ctx, 4096); !isUnreachable(err) {
		t.Fatalf("sum with global 1: err = %v, want unreachable trap", err)
	}
}

// TestInstrumentErrorsWrap checks errors carry position context.
func TestInstrumentErrorsWrap(t *testing.T) {
	in := module(sec(1, vec(voidType)), sec(3, vec([]byte{0})), sec(10, vec(cat(leb(2), []byte{0x00, 0x41}))))
	_, err := Instrument(in, testExport)
	if !errors.Is(err, errTruncated) {
		t.Fatalf("err = %v, want it to wrap errTruncated", err)
	}
	for _, want := range []string{"section 10", "function body 0", "instruction 0x41"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %q lacks %q", err, want)
		}
	}
}
