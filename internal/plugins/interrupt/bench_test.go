package interrupt

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// BenchmarkInstrument instruments the ~2 MB Go-compiled guest.
func BenchmarkInstrument(b *testing.B) {
	wasm := goGuest(b, "guest")
	b.SetBytes(int64(len(wasm)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Instrument(wasm, testExport); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoopCheck times one call summing a 4 KiB buffer (4096 loop
// iterations) in three set-ups:
//   - plain: not instrumented, CloseOnContextDone(false) (no termination check),
//   - instrumented: Instrument's global check, CloseOnContextDone(false),
//   - closeOnDone: not instrumented, wazero's CloseOnContextDone(true).
//
// "go" is the Go guest's sum export, "wasm" the hand-assembled loop.
func BenchmarkLoopCheck(b *testing.B) {
	ctx := context.Background()
	setups := []struct {
		name        string
		instrument  bool
		closeOnDone bool
	}{
		{"plain", false, false},
		{"instrumented", true, false},
		{"closeOnDone", false, true},
	}
	for _, guest := range []string{"go", "wasm"} {
		for _, s := range setups {
			b.Run(guest+"/"+s.name, func(b *testing.B) {
				var wasm []byte
				if guest == "go" {
					wasm = goGuest(b, "guest")
				} else {
					wasm = loopModule()
				}
				if s.instrument {
					var err error
					if wasm, err = Instrument(wasm, testExport); err != nil {
						b.Fatal(err)
					}
				}
				r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(s.closeOnDone))
				defer r.Close(ctx)
				var mod api.Module
				var ptr uint32
				if guest == "go" {
					mod = instantiateGuest(b, r, wasm)
					res, err := mod.ExportedFunction("buf_ptr").Call(ctx)
					if err != nil {
						b.Fatal(err)
					}
					ptr = uint32(res[0])
				} else {
					instantiateEnv(b, r)
					var err error
					if mod, err = r.Instantiate(ctx, wasm); err != nil {
						b.Fatal(err)
					}
				}
				data := make([]byte, 4096)
				for i := range data {
					data[i] = byte(i)
				}
				mod.Memory().Write(ptr, data)
				sum := mod.ExportedFunction("sum")
				params := []uint64{4096}
				res, err := sum.Call(ctx, params...)
				if err != nil || res[0] != 4096/256*(255*256/2) {
					b.Fatalf("sum = %v, %v", res, err)
				}
				b.ResetTimer()
				for b.Loop() {
					if _, err := sum.Call(ctx, params...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
