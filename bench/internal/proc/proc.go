// Package proc runs the benchmark's servers — the mock upstream and the
// gateway — as child processes on loopback, waits until they serve, stops
// them, and reads their memory and CPU use from /proc (Linux).
package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startTimeout bounds how long a child may take to serve.
const startTimeout = 30 * time.Second

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// Child is one running server process. Its methods are goroutine-safe.
type Child struct {
	// Name labels the child in errors ("mock", "gateway").
	Name string
	// Addr is the host:port the child announced it listens on.
	Addr string

	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{} // closed when the process has exited
	waitErr error         // set before done is closed

	stopOnce sync.Once
	stopErr  error
}

// PID returns the child's process id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (c *Child) Exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.waitErr
	default:
		return false, nil
	}
}

// LogTail returns up to the last n lines the child wrote to stdout and
// stderr, its address banner left out.
func (c *Child) LogTail(n int) string {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// accessMark is in every line of the gateway's access log (the "access"
// sub-logger of the root logger "breakwater").
const accessMark = "breakwater.access:"

// quietLevels mark log lines that are routine (hclog's text format).
var quietLevels = []string{"[INFO]", "[DEBUG]", "[TRACE]"}

// LogSummary scans what the child has written so far: how many lines are
// access log lines, how many are neither access lines nor routine (info,
// debug, trace) lines — warnings, errors, anything not in hclog's format
// such as a panic — and the last n of those (its address banner left out).
func (c *Child) LogSummary(n int) (access, other int, tail string) {
	f, err := os.Open(c.logPath)
	if err != nil {
		return 0, 0, ""
	}
	defer f.Close()
	var last []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, accessMark) {
			access++
			continue
		}
		if slices.ContainsFunc(quietLevels, func(l string) bool { return strings.Contains(line, l) }) {
			continue
		}
		other++
		if last = append(last, line); len(last) > n {
			last = last[1:]
		}
	}
	return access, other, strings.Join(last, "\n")
}

// Stop sends SIGTERM, waits up to 5 s, then kills the process. It is
// idempotent and returns nil if the process had already exited.
func (c *Child) Stop() error {
	c.stopOnce.Do(func() {
		defer c.logFile.Close()
		if exited, _ := c.Exited(); exited {
			return
		}
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			c.stopErr = fmt.Errorf("stopping %s: %w", c.Name, err)
		}
		select {
		case <-c.done:
			return
		case <-time.After(stopGrace):
		}
		if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			c.stopErr = fmt.Errorf("killing %s: %w", c.Name, err)
		}
		<-c.done
		if c.stopErr == nil {
			c.stopErr = fmt.Errorf("%s did not stop within %v of SIGTERM and was killed", c.Name, stopGrace)
		}
	})
	return c.stopErr
}

// start runs bin with args, its output going to dir/name.log, and returns
// once the first stdout line starting with banner (followed by
// "http://ADDR") has been read.
func start(ctx context.Context, name, bin, dir, banner string, args ...string) (*Child, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("piping %s stdout: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	c := &Child{Name: name, cmd: cmd, logPath: logPath, logFile: logFile, done: make(chan struct{})}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			line := sc.Text()
			if !found {
				if addr, ok := parseBanner(line, banner); ok {
					found = true
					addrCh <- addr
					continue // the banner is not log output
				}
			}
			fmt.Fprintln(logFile, line)
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		err := cmd.Wait()
		c.waitErr = err
		close(c.done)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case addr := <-addrCh:
		c.Addr = addr
		return c, nil
	case <-c.done:
		err = fmt.Errorf("%s exited before it was ready (%v); log:\n%s", name, c.waitErr, c.LogTail(20))
	case <-timer.C:
		err = fmt.Errorf("%s did not announce its address within %v; log:\n%s", name, startTimeout, c.LogTail(20))
	case <-ctx.Done():
		err = fmt.Errorf("starting %s: %w", name, ctx.Err())
	}
	_ = c.Stop()
	return nil, err
}

// parseBanner extracts ADDR from a line "<banner> http://ADDR".
func parseBanner(line, banner string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), banner)
	if !ok {
		return "", false
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(rest), "http://")
	if !ok || addr == "" {
		return "", false
	}
	return strings.TrimRight(addr, "/"), true
}

// StartMock runs `bin mock --listen 127.0.0.1:port` and returns once it has
// announced its address. dir receives its log.
func StartMock(ctx context.Context, bin, dir string, port int) (*Child, error) {
	return start(ctx, "mock", bin, dir, "mock upstream listening on",
		"mock", "--listen", fmt.Sprintf("127.0.0.1:%d", port))
}

// BareSource and GatewaySource are the loopback source addresses of the
// bare proxy's and (where a scenario asks for it, Shape.Source) the
// gateway's upstream connections, so that each column of a table dials the
// mock from its own address: with thousands of streams per column, the
// connections the columns before left in TIME_WAIT would otherwise crowd
// the next column's ephemeral ports on the same address pair (the
// generator's direct calls keep 127.0.0.1).
const (
	BareSource    = "127.0.0.3"
	GatewaySource = "127.0.0.2"
)

// BareProxyCommand is the hidden first argument that makes the benchmark
// binary run the bare proxy.
const BareProxyCommand = "bareproxy"

// BareProxyName is the bare proxy child's name (Child.Name, its log file).
const BareProxyName = "bareproxy"

// StartBareProxy runs `self bareproxy -listen 127.0.0.1:port -upstream
// upstream` (self being the benchmark's own binary) followed by extra (for
// example -pprof ADDR) and returns once it has announced its address. dir
// receives its log.
func StartBareProxy(ctx context.Context, self, dir string, port int, upstream string, extra ...string) (*Child, error) {
	return start(ctx, BareProxyName, self, dir, "bare proxy listening on",
		append([]string{BareProxyCommand, "-listen", fmt.Sprintf("127.0.0.1:%d", port), "-upstream", upstream, "-local", BareSource}, extra...)...)
}

// StartGatewayWith writes cfg (which sets the listen address) to
// dir/NAME.yaml, runs `bin serve --config FILE` followed by extra (for
// example a hidden --pprof ADDR) at the default log level, so the access
// log is on, with its output in dir/NAME.log, and returns once GET
// /v1/models answers 200.
func StartGatewayWith(ctx context.Context, bin, dir, name string, cfg []byte, extra ...string) (*Child, error) {
	cfgPath := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, fmt.Errorf("writing the %s configuration: %w", name, err)
	}
	c, err := start(ctx, name, bin, dir, "breakwater listening on",
		append([]string{"serve", "--config", cfgPath}, extra...)...)
	if err != nil {
		return nil, err
	}
	if err := waitModels(ctx, c); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// waitModels polls GET /v1/models until it answers 200.
func waitModels(ctx context.Context, c *Child) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(startTimeout)
	url := "http://" + c.Addr + "/v1/models"
	last := "no answer"
	for time.Now().Before(deadline) {
		if exited, err := c.Exited(); exited {
			return fmt.Errorf("%s exited before it was ready (%v); log:\n%s", c.Name, err, c.LogTail(20))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("building the readiness probe: %w", err)
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for the %s: %w", c.Name, ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s GET /v1/models not 200 within %v (last: %s); log:\n%s", c.Name, startTimeout, last, c.LogTail(20))
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
