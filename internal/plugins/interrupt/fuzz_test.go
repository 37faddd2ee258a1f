package interrupt

import (
	"bytes"
	"testing"
)

// FuzzInstrument checks that Instrument never panics, returns no output
// with an error, does not modify its input, and that its output can be
// instrumented again under another name but not under the same one.
// (Whether wazero accepts the output is tested on chosen modules elsewhere:
// wazero itself may allocate without bound on fuzzed input.)
func FuzzInstrument(f *testing.F) {
	f.Add(loopModule())
	f.Add(module())
	f.Add(module(sec(1, vec(voidType)), sec(3, vec([]byte{0})),
		sec(10, vec(body(0x03, 0x40, 0x02, 0x7f, 0x41, 0x03, 0x0b, 0x1a, 0x0c, 0x00, 0x0b))),
		custom(".debug_info", []byte{1}), custom("name", []byte{0})))
	f.Add(module(sec(1, vec(voidType)), sec(3, vec([]byte{0})),
		sec(10, vec(body(0xfd, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1a,
			0x1f, 0x40, 0x01, 0x02, 0x00, 0x0b, 0xfc, 0x0b, 0x00, 0x0e, 0x01, 0x00, 0x00)))))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x0a\x80"))
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		out, err := Instrument(in, "a")
		if !bytes.Equal(in, orig) {
			t.Fatal("input modified")
		}
		if err != nil {
			if out != nil {
				t.Fatal("output with an error")
			}
			return
		}
		out2, err := Instrument(out, "b")
		if err != nil {
			t.Fatalf("instrumented output cannot be instrumented again: %v", err)
		}
		if len(out2) <= len(out) {
			t.Fatal("second instrumentation did not grow the module")
		}
		if _, err := Instrument(out, "a"); err == nil {
			t.Fatal("second instrumentation under the same name accepted")
		}
	})
}
