package plugins

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
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

// testDir holds the guests built for this run and the shared compilation
// cache, so each guest is built and compiled once per `go test` run.
var testDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "breakwater-plugins-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testDir = dir
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// guestBuild is one .wasm the tests need: a main package and build flags.
type guestBuild struct {
	dir     string // relative to this package
	cshared bool
	ldflags string
}

var guestBuilds = map[string]guestBuild{
	"example": {dir: "../../examples/quota-header-plugin", cshared: true},
	"route":   {dir: "../../examples/route-plugin", cshared: true},
	"echo":    {dir: "testdata/echo", cshared: true},
	"faulty":  {dir: "testdata/faulty", cshared: true},
	"raw":     {dir: "testdata/raw", cshared: true},
	"raw-v2":  {dir: "testdata/raw", cshared: true, ldflags: "-X=main.abiMajor=2"},
	"raw-cmd": {dir: "testdata/raw"}, // a WASI command (exports _start)
}

var (
	buildOnce  sync.Once
	builtPaths map[string]string
	buildSkip  string
	buildErr   error
)

// guest returns the path of a built test guest, building every guest on
// first use. It skips the test when the Go toolchain cannot target wasip1.
func guest(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(buildGuests)
	if buildSkip != "" {
		t.Skip(buildSkip)
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	p, ok := builtPaths[name]
	if !ok {
		t.Fatalf("no test guest %q", name)
	}
	return p
}

func buildGuests() {
	gobin, err := exec.LookPath("go")
	if err != nil {
		buildSkip = "the go command is not on PATH: WebAssembly guests are not built"
		return
	}
	out, err := exec.Command(gobin, "tool", "dist", "list").Output()
	if err != nil {
		buildSkip = fmt.Sprintf("cannot list Go targets (%v): WebAssembly guests are not built", err)
		return
	}
	if !bytes.Contains(out, []byte("wasip1/wasm")) {
		buildSkip = "this Go toolchain cannot target wasip1/wasm: WebAssembly guests are not built"
		return
	}
	builtPaths = make(map[string]string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []string
	for name, b := range guestBuilds {
		dst := filepath.Join(testDir, name+".wasm")
		builtPaths[name] = dst
		wg.Go(func() {
			args := []string{"build", "-o", dst}
			if b.cshared {
				args = append(args, "-buildmode=c-shared")
			}
			if b.ldflags != "" {
				args = append(args, "-ldflags="+b.ldflags)
			}
			cmd := exec.Command(gobin, append(args, ".")...)
			cmd.Dir = b.dir
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOWORK=off")
			if out, err := cmd.CombinedOutput(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("build %s (%s): %v\n%s", name, b.dir, err, out))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		buildErr = fmt.Errorf("building test guests:\n%s", strings.Join(errs, "\n"))
	}
}

// skipUnderRace skips a sequential test under the race detector, where
// each extra guest costs a compile about ten times slower. The tests using
// only the example and faulty guests (among them the concurrency test)
// always run.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("compiles extra guests; run without -race (covered by the plain `go test` run)")
	}
}

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testNow is the fake clock's start in every test.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testHost is a Host over a fake clock with its logs captured.
type testHost struct {
	*Host
	clock *clocktest.Clock
	logs  *logBuffer
}

// newTestHost returns a Host sharing this run's compilation cache; opts
// fields left zero get the test defaults (fake clock, captured logs, a
// generous call timeout so a loaded machine does not fail calls).
func newTestHost(t testing.TB, opts Options) *testHost {
	t.Helper()
	th := &testHost{logs: &logBuffer{}}
	if opts.Clock == nil {
		th.clock = clocktest.NewClock(testNow)
		opts.Clock = th.clock
	}
	if opts.Logger == nil {
		opts.Logger = hclog.New(&hclog.LoggerOptions{Name: "test", Output: th.logs, Level: hclog.Trace})
	}
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(testDir, "wazero-cache")
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 5 * time.Second
	}
	h, err := NewHost(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	th.Host = h
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return th
}

// status returns the named plugin's status.
func (th *testHost) status(t testing.TB, name string) Status {
	t.Helper()
	for _, s := range th.List() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("plugin %q not listed in %+v", name, th.List())
	return Status{}
}
