package coding

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"", "", true},
		{"identity", "", true},
		{" GZIP ", "gzip", true},
		{"x-gzip", "x-gzip", true},
		{"deflate", "deflate", true},
		{"gzip, gzip", "gzip, gzip", false},
		{"br", "br", false},
		{"zstd", "zstd", false},
		{"gzip\r\nX-Evil: 1", "gzip??x-evil? 1", false},
		{strings.Repeat("a", 100), strings.Repeat("a", 24), false},
	} {
		got, ok := Parse(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("Parse(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func gz(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDecodeAllBounded: a bomb (4 MB of zeros in about 4 KB of gzip,
// the probe's ratio) stops at the limit; a body at the limit decodes.
func TestDecodeAllBounded(t *testing.T) {
	bomb := gz(t, make([]byte, 4<<20))
	if len(bomb) > 8<<10 {
		t.Fatalf("the bomb is %d bytes", len(bomb))
	}
	if _, err := DecodeAll("gzip", bomb, 256<<10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("4 MB bomb under a 256 KiB limit: %v", err)
	}
	exact := bytes.Repeat([]byte("x"), 1000)
	out, err := DecodeAll("x-gzip", gz(t, exact), 1000)
	if err != nil || !bytes.Equal(out, exact) {
		t.Fatalf("a body at the limit: %v (%d bytes)", err, len(out))
	}
	if _, err := DecodeAll("gzip", gz(t, exact), 999); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("one byte over: %v", err)
	}
}

func TestDecodeAllDeflateBothShapes(t *testing.T) {
	want := []byte(`{"model":"m","messages":[]}`)
	var z, raw bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write(want)
	_ = zw.Close()
	fw, _ := flate.NewWriter(&raw, flate.DefaultCompression)
	_, _ = fw.Write(want)
	_ = fw.Close()
	for name, body := range map[string][]byte{"zlib": z.Bytes(), "raw": raw.Bytes()} {
		out, err := DecodeAll("deflate", body, 1<<20)
		if err != nil || !bytes.Equal(out, want) {
			t.Errorf("%s deflate: %v %q", name, err, out)
		}
	}
}

func TestDecodeAllCorrupt(t *testing.T) {
	good := gz(t, []byte("hello hello hello"))
	for name, body := range map[string][]byte{
		"not gzip":  []byte("hello"),
		"truncated": good[:len(good)-6],
		"checksum":  append(append([]byte(nil), good[:len(good)-8]...), 0, 0, 0, 0, 0, 0, 0, 0),
	} {
		if _, err := DecodeAll("gzip", body, 1<<20); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if out, err := DecodeAll("gzip", nil, 10); err != nil || len(out) != 0 {
		t.Errorf("empty body: %v %q", err, out)
	}
}

func TestIsCorrupt(t *testing.T) {
	r, err := NewReader("gzip", bytes.NewReader([]byte("plainly not gzip")))
	if err == nil {
		_, err = io.ReadAll(r)
	}
	if !IsCorrupt(err) {
		t.Fatalf("IsCorrupt(%v) = false", err)
	}
	if IsCorrupt(io.ErrClosedPipe) {
		t.Fatal("a reader failure is not corruption")
	}
}

// BenchmarkDecodeAllBomb is the cost of refusing the probe's 100 MB
// bomb at a 10 MiB limit.
func BenchmarkDecodeAllBomb(b *testing.B) {
	bomb := gz(b, make([]byte, 100<<20))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeAll("gzip", bomb, 10<<20); !errors.Is(err, ErrTooLarge) {
			b.Fatal(err)
		}
	}
}
