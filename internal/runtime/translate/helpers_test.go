package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// fixedNow is the clock of every test translation ("created" fields).
var fixedNow = time.Unix(1767225600, 0)

// fixtures lists the files of a testdata folder.
func fixtures(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata/%s (%v)", dir, err)
	}
	return files
}

func readFileErr(path string) ([]byte, error) { return os.ReadFile(path) }

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func baseName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// checkGolden compares got with testdata/golden/name, or rewrites it with
// -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run go test -update)", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("golden %s differs:\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

// indent pretty-prints a JSON document for golden files.
func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		t.Fatalf("output is not valid JSON: %v\n%s", err, b)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

// readSSE parses a recorded SSE body into events with the relay's reader.
func readSSE(t *testing.T, path string) []Event {
	t.Helper()
	return parseSSE(readFile(t, path))
}

// parseSSE reads every event of body with sse.Reader, copying what the
// reader's buffer aliases. Comment events are kept.
func parseSSE(body []byte) []Event {
	r := sse.NewReader(bytes.NewReader(body))
	var out []Event
	for {
		ev, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				panic(fmt.Sprintf("fixture is not a valid SSE stream: %v", err))
			}
			return out
		}
		out = append(out, Event{Event: ev.Event, Data: bytes.Clone(ev.Data), Comment: ev.Comment})
	}
}

// writeSSE renders events the way the relay writes them.
func writeSSE(events []Event) []byte {
	var b []byte
	for _, e := range events {
		b = sse.AppendEvent(b, e)
	}
	return b
}

// runStream feeds events through tr, checking that every emitted data line
// is valid JSON (or [DONE]) and that Event never fails.
func runStream(t *testing.T, tr Translator, in []Event) []Event {
	t.Helper()
	var out []Event
	for i, ev := range in {
		got, err := tr.Event(ev)
		if err != nil {
			t.Fatalf("event %d (%s): %v", i, ev.Event, err)
		}
		out = append(out, got...)
	}
	out = append(out, tr.Finish()...)
	for i, ev := range out {
		if string(ev.Data) == "[DONE]" {
			continue
		}
		if !json.Valid(ev.Data) {
			t.Fatalf("emitted event %d is not valid JSON: %s", i, ev.Data)
		}
	}
	return out
}

// obj decodes a JSON object for assertions.
func obj(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, b)
	}
	return m
}

// at walks a decoded JSON value by keys and indexes: at(m, "messages", 0, "role").
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %q on a non-object %v", path, k, v)
			}
			v, ok = m[k]
			if !ok {
				t.Fatalf("at %v: no key %q in %v", path, k, m)
			}
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: index %d out of %v", path, k, v)
			}
			v = a[k]
		}
	}
	return v
}

// has reports whether object m has key k.
func has(m any, k string) bool {
	o, ok := m.(map[string]any)
	if !ok {
		return false
	}
	_, ok = o[k]
	return ok
}

// jsonEq compares two JSON texts semantically.
func jsonEq(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("not JSON: %v: %s", err, a)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
