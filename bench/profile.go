package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/bench/internal/proc"
)

// profileTop is how many functions of each CPU profile the report lists.
const profileTop = 10

// Profile is the gateway's profiles of one measured run.
type Profile struct {
	// Scenario names the run ("throughput", "open-loop-500", ...).
	Scenario string `json:"scenario"`
	// CPUFile and AllocsFile are the profiles written, relative to the
	// output directory.
	CPUFile    string `json:"cpu_file"`
	AllocsFile string `json:"allocs_file"`
	Seconds    int    `json:"seconds"`
	// Requests is how many requests the profiled process was sent while
	// profiled (0: not known); Split is its CPU by part, Own and OwnFuncs
	// its own code's by package and by function (splitTraces).
	Requests int         `json:"requests,omitempty"`
	Split    []SplitPart `json:"split,omitempty"`
	Own      []SplitPart `json:"own,omitempty"`
	OwnFuncs []SplitPart `json:"own_functions,omitempty"`
	// Flat and Cum are the top functions by own and by cumulative CPU time.
	Flat []ProfileLine `json:"top_flat,omitempty"`
	Cum  []ProfileLine `json:"top_cum,omitempty"`
	// Err says what went wrong, if anything did.
	Err string `json:"error,omitempty"`
}

// ProfileLine is one row of `go tool pprof -top`.
type ProfileLine struct {
	Function string  `json:"function"`
	Flat     string  `json:"flat"`
	FlatPct  float64 `json:"flat_pct"`
	Cum      string  `json:"cum"`
	CumPct   float64 `json:"cum_pct"`
}

// profiler takes the gateways' profiles over their /debug/pprof endpoints
// (`serve --pprof`) and writes them under dir. It is used by the
// benchmark's goroutine; captures run in their own goroutines.
type profiler struct {
	dir    string
	addr   map[string]string // gateway name → pprof address
	client *http.Client
	caps   []*capture
}

func newProfiler(dir string) *profiler {
	return &profiler{dir: dir, addr: map[string]string{}, client: &http.Client{Timeout: 10 * time.Minute}}
}

// capture is one run's CPU and allocation profiles being taken.
type capture struct {
	scenario    string
	seconds     int
	cpu, allocs string // file paths
	// requests is how many requests the target was sent over its
	// measured slices (0: unknown), set once the load is done.
	requests int
	wg       sync.WaitGroup
	mu       sync.Mutex
	errs     []error
}

// start begins a CPU and an allocation (delta) profile of gateway gw for
// the run named scenario, lasting d rounded to whole seconds (at least
// one, as pprof wants).
func (p *profiler) start(ctx context.Context, gw, scenario string, d time.Duration) *capture {
	c := &capture{scenario: scenario, seconds: max(1, int(d.Round(time.Second)/time.Second))}
	p.caps = append(p.caps, c)
	addr, ok := p.addr[gw]
	if !ok {
		c.errs = append(c.errs, fmt.Errorf("gateway %s has no pprof endpoint", gw))
		return c
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		c.errs = append(c.errs, err)
		return c
	}
	name := fileSafe(scenario)
	c.cpu = filepath.Join(p.dir, name+".cpu.pprof")
	c.allocs = filepath.Join(p.dir, name+".allocs.pprof")
	for _, f := range []struct{ url, path string }{
		{fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, c.seconds), c.cpu},
		{fmt.Sprintf("http://%s/debug/pprof/allocs?seconds=%d", addr, c.seconds), c.allocs},
	} {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if err := p.fetch(ctx, f.url, f.path); err != nil {
				c.mu.Lock()
				c.errs = append(c.errs, err)
				c.mu.Unlock()
			}
		}()
	}
	return c
}

// profile starts the profiles of gateway gw for a run outside measure,
// when profiling; nil otherwise.
func (b *bench) profile(ctx context.Context, gw *proc.Child, scenario string, d time.Duration) *capture {
	if b.profiler == nil {
		return nil
	}
	return b.profiler.start(ctx, gw.Name, scenario, d)
}

// wait returns once both profiles are written (or failed).
func (c *capture) wait() { c.wg.Wait() }

func (p *profiler) fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", filepath.Base(path), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profile %s: %s: %s", filepath.Base(path), resp.Status, strings.TrimSpace(string(msg)))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: %w", filepath.Base(path), err)
	}
	return f.Close()
}

// summarise waits for every capture and lists the top functions of each
// CPU profile with `go tool pprof -top`.
func (p *profiler) summarise(ctx context.Context) []Profile {
	var out []Profile
	for _, c := range p.caps {
		c.wait()
		pr := Profile{Scenario: c.scenario, Seconds: c.seconds}
		if c.cpu != "" {
			pr.CPUFile, _ = filepath.Rel(filepath.Dir(p.dir), c.cpu)
			pr.AllocsFile, _ = filepath.Rel(filepath.Dir(p.dir), c.allocs)
		}
		errs := c.errs
		if len(errs) == 0 {
			var err error
			if pr.Flat, err = pprofTop(ctx, c.cpu, false); err != nil {
				errs = append(errs, err)
			}
			if pr.Cum, err = pprofTop(ctx, c.cpu, true); err != nil {
				errs = append(errs, err)
			}
			pr.Requests = c.requests
			if pr.Split, pr.Own, pr.OwnFuncs, err = pprofSplit(ctx, c.cpu); err != nil {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			pr.Err = strings.ReplaceAll(err.Error(), "\n", "; ")
		}
		out = append(out, pr)
	}
	return out
}

// pprofTop runs `go tool pprof -top` on a CPU profile, sorted by flat or
// cumulative time, and parses its rows.
func pprofTop(ctx context.Context, path string, cum bool) ([]ProfileLine, error) {
	args := []string{"tool", "pprof", "-top", "-nodecount=" + strconv.Itoa(profileTop)}
	if cum {
		args = append(args, "-cum")
	}
	out, err := exec.CommandContext(ctx, "go", append(args, path)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("go tool pprof %s: %w", filepath.Base(path), err)
	}
	return parseTop(string(out))
}

// parseTop reads the rows of `go tool pprof -top` output: after the
// header line "flat flat% sum% cum cum%", each row is those five columns
// and the function name (which may contain spaces).
func parseTop(text string) ([]ProfileLine, error) {
	var out []ProfileLine
	inRows := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if !inRows {
			inRows = len(f) >= 5 && f[0] == "flat" && f[1] == "flat%"
			continue
		}
		if len(f) < 6 {
			continue
		}
		flatPct, err1 := strconv.ParseFloat(strings.TrimSuffix(f[1], "%"), 64)
		cumPct, err2 := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("unexpected pprof row %q", sc.Text())
		}
		out = append(out, ProfileLine{Flat: f[0], FlatPct: flatPct, Cum: f[3], CumPct: cumPct, Function: strings.Join(f[5:], " ")})
	}
	if !inRows {
		return nil, errors.New("no rows in the pprof output")
	}
	return out, nil
}

// fileSafe turns a scenario name into a file name.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '-'
	}, s)
}

// profilesMarkdown renders the top functions of every CPU profile.
func (r *Report) profilesMarkdown(b *strings.Builder) {
	if len(r.Profiles) == 0 {
		return
	}
	t := table{b}
	fmt.Fprintf(b, "## Profiles of the gateway (PROFILE=1)\n\n"+
		"A CPU and an allocation profile of the gateway for every measured gateway run, taken over its `--pprof` endpoint while the "+
		"run lasted (`go tool pprof FILE`; files relative to the output directory); in the interleaved tables (fixed rate, "+
		"max throughput, streaming) the bare proxy's too (`-bare`), over the same window, so the two compare. The top %d "+
		"functions of each CPU profile, by own time (flat) and by time including callees (cum), follow the split below.\n\n", profileTop)
	r.splitMarkdown(b)
	for _, p := range r.Profiles {
		fmt.Fprintf(b, "### %s (%d s): `%s`, `%s`\n\n", p.Scenario, p.Seconds, p.CPUFile, p.AllocsFile)
		if p.Err != "" {
			b.WriteString("Not available: " + p.Err + "\n\n")
			continue
		}
		t.head("#", "flat", "flat %", "function (by flat)", "cum", "cum %", "function (by cum)")
		for i := range max(len(p.Flat), len(p.Cum)) {
			cells := []string{strconv.Itoa(i + 1), "", "", "", "", "", ""}
			if i < len(p.Flat) {
				l := p.Flat[i]
				cells[1], cells[2], cells[3] = l.Flat, fmt.Sprintf("%.1f %%", l.FlatPct), "`"+l.Function+"`"
			}
			if i < len(p.Cum) {
				l := p.Cum[i]
				cells[4], cells[5], cells[6] = l.Cum, fmt.Sprintf("%.1f %%", l.CumPct), "`"+l.Function+"`"
			}
			t.row(cells...)
		}
		b.WriteString("\n")
	}
}
