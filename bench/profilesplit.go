package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SplitPart is the CPU time a profile's samples spent in one part of the
// process (see splitParts), over the whole profile.
type SplitPart struct {
	Part    string  `json:"part"`
	Seconds float64 `json:"seconds"`
}

// splitPart is one part of a proxy's CPU time: a sample belongs to the
// first part any of whose frame prefixes one of its frames starts with.
type splitPart struct {
	name   string
	frames []string
}

// splitParts are the parts a proxy's CPU splits into, in the order a
// sample is tested against them. The kernel's share of the loopback
// writes and reads comes first (it is the same work for any proxy on the
// path), then the Go scheduler and network poller, the collector, the
// upstream client (fasthttp's), the proxy's own code (this module's
// packages: the gateway's request handling, the bare proxy's handler),
// and fasthttp's server (reading requests, writing answers).
var splitParts = []splitPart{
	{"write syscalls (client answers, upstream requests)", []string{"syscall.write"}},
	{"read syscalls", []string{"syscall.read"}},
	{"scheduler, network poller, thread wake-ups", []string{
		"runtime.schedule", "runtime.findRunnable", "runtime.mcall", "runtime.park_m", "runtime.netpoll",
		"runtime.futex", "runtime.wakep", "runtime.startm", "runtime.stopm", "runtime.notewakeup",
		"runtime.notesleep", "runtime.sysmon", "runtime.goready", "runtime.ready", "runtime.injectglist",
		"internal/runtime/syscall/linux.EpollWait", "runtime.usleep", "runtime.osyield"}},
	{"garbage collection and allocation", []string{
		"runtime.gcBgMarkWorker", "runtime.gcAssist", "runtime.mallocgc", "runtime.bgsweep", "runtime.bgscavenge",
		"runtime.gcStart", "runtime.gcMarkDone", "runtime.markroot", "runtime.gcDrain", "runtime.newobject",
		"runtime.makeslice", "runtime.growslice"}},
	{"upstream client (fasthttp, net/http)", []string{
		"github.com/valyala/fasthttp.(*HostClient)", "github.com/valyala/fasthttp.(*Client)",
		"github.com/valyala/fasthttp.(*transport)", "net/http.(*Transport)", "net/http.(*persistConn)"}},
	{ownPart, []string{ownCode}},
	{"fasthttp server (requests read, answers written)", []string{"github.com/valyala/fasthttp."}},
}

// otherPart names the samples no part claims; ownPart is the part of the
// proxy's own code.
const (
	otherPart = "other"
	ownPart   = "the proxy's own code"
)

// ownCode is the module prefix of the proxy's own frames.
const ownCode = "github.com/breakwater-dev/breakwater/"

// pprofSplit splits a CPU profile's time by part (splitParts), and the
// proxy's own code by package and by function, from `go tool pprof
// -traces` (see splitTraces).
func pprofSplit(ctx context.Context, path string) (parts, own, ownFuncs []SplitPart, err error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-traces", path).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, nil, nil, fmt.Errorf("go tool pprof -traces %s: %w", filepath.Base(path), err)
	}
	return splitTraces(string(out))
}

// splitTraces reads `go tool pprof -traces` output — blocks separated by
// "-----------+----…" lines, each a sample's time ("10ms", "1.20s") on
// its first line before the leaf frame, then one frame per line — and adds
// each block's time to the first part one of its frames belongs to. Parts
// are returned in splitParts order, then otherPart; every part is listed,
// with zero when no sample fell in it. own splits the proxy's own code by
// the package of each sample's leaf-most own frame (the time in the
// standard library, fasthttp and runtime it calls included), largest
// first; ownFuncs by that frame's function, the ownFuncsListed largest.
func splitTraces(text string) (parts, own, ownFuncs []SplitPart, err error) {
	sums := make([]time.Duration, len(splitParts)+1)
	byPkg, byFunc := map[string]time.Duration{}, map[string]time.Duration{}
	var frames []string
	var sample time.Duration
	blocks := 0
	flush := func() {
		if len(frames) == 0 {
			return
		}
		i := partOf(frames)
		sums[i] += sample
		if i < len(splitParts) && splitParts[i].name == ownPart {
			fn := ownFrame(frames)
			byPkg[packageOf(fn)] += sample
			byFunc[fn] += sample
		}
		frames, sample = frames[:0], 0
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	inBlocks := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			inBlocks = true
			continue
		}
		if !inBlocks || strings.TrimSpace(line) == "" {
			continue
		}
		if len(frames) == 0 {
			// The block's first line: "   860ms   leaf.frame (inline)".
			f := strings.Fields(line)
			if len(f) < 2 {
				return nil, nil, nil, fmt.Errorf("unexpected pprof -traces line %q", line)
			}
			d, err := time.ParseDuration(f[0])
			if err != nil {
				return nil, nil, nil, fmt.Errorf("unexpected pprof -traces sample %q: %w", f[0], err)
			}
			sample = d
			blocks++
			frames = append(frames, frameName(strings.TrimSpace(line)[len(f[0]):]))
			continue
		}
		frames = append(frames, frameName(line))
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, nil, nil, err
	}
	if blocks == 0 {
		return nil, nil, nil, errors.New("no samples in the pprof -traces output")
	}
	parts = make([]SplitPart, 0, len(sums))
	for i, d := range sums {
		name := otherPart
		if i < len(splitParts) {
			name = splitParts[i].name
		}
		parts = append(parts, SplitPart{Part: name, Seconds: d.Seconds()})
	}
	own, ownFuncs = largestFirst(byPkg), largestFirst(byFunc)
	if len(ownFuncs) > ownFuncsListed {
		ownFuncs = ownFuncs[:ownFuncsListed]
	}
	return parts, own, ownFuncs, nil
}

// ownFuncsListed is how many of the own code's functions a split keeps.
const ownFuncsListed = 15

// largestFirst lists sums largest first (then by name).
func largestFirst(sums map[string]time.Duration) []SplitPart {
	out := make([]SplitPart, 0, len(sums))
	for name, d := range sums {
		out = append(out, SplitPart{Part: name, Seconds: d.Seconds()})
	}
	slices.SortFunc(out, func(a, b SplitPart) int {
		if c := cmp.Compare(b.Seconds, a.Seconds); c != 0 {
			return c
		}
		return strings.Compare(a.Part, b.Part)
	})
	return out
}

// ownFrame is the leaf-most of frames in the proxy's own code, relative
// to the module ("internal/runtime/server.(*Server).render"), without
// pprof's " (inline)" mark.
func ownFrame(frames []string) string {
	for _, f := range frames {
		if rest, ok := strings.CutPrefix(f, ownCode); ok {
			return rest
		}
	}
	return otherPart
}

// packageOf is the package of a function named as ownFrame names it
// ("internal/runtime/server" for "internal/runtime/server.(*Server).render").
func packageOf(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	if dot := strings.IndexByte(fn[slash+1:], '.'); dot >= 0 {
		return fn[:slash+1+dot]
	}
	return fn
}

// frameName is a -traces line's frame: the function's name, which may
// hold spaces (a generic instantiation's shape), without pprof's
// " (inline)" mark.
func frameName(line string) string {
	return strings.TrimSuffix(strings.TrimSpace(line), " (inline)")
}

// partOf is the index in splitParts of the first part one of frames
// belongs to, or len(splitParts) (otherPart).
func partOf(frames []string) int {
	for i, p := range splitParts {
		for _, f := range frames {
			for _, prefix := range p.frames {
				if strings.HasPrefix(f, prefix) {
					return i
				}
			}
		}
	}
	return len(splitParts)
}

// splitMarkdown renders, for every profile of the gateway that has a bare
// proxy's profile of the same window beside it (Scenario and
// Scenario+"-bare", both with request counts), the CPU per request of each
// part in both processes and the difference: where the gateway's extra
// CPU goes.
func (r *Report) splitMarkdown(b *strings.Builder) {
	byName := map[string]Profile{}
	for _, p := range r.Profiles {
		byName[p.Scenario] = p
	}
	t := table{b}
	header := false
	for _, gw := range r.Profiles {
		bare, ok := byName[gw.Scenario+"-bare"]
		if !ok || gw.Requests == 0 || bare.Requests == 0 || len(gw.Split) == 0 || len(bare.Split) != len(gw.Split) {
			continue
		}
		if !header {
			header = true
			b.WriteString("### Where a request's CPU goes: the bare proxy and the gateway, same window\n\n" +
				"Each profile's samples split by part (the first part a sample's stack reaches, in the order listed) and " +
				"divided by the requests that process was sent over the window. pprof's samples see somewhat less CPU " +
				"than `/proc` counts (the tables' proxy CPU / request), alike in both processes.\n\n")
		}
		fmt.Fprintf(b, "**%s** (bare proxy %d requests, gateway %d):\n\n", gw.Scenario, bare.Requests, gw.Requests)
		t.head("part", "bare proxy µs / request", "Breakwater µs / request", "Breakwater − bare")
		var sumBare, sumGW float64
		for i := range gw.Split {
			pb := bare.Split[i].Seconds * 1e6 / float64(bare.Requests)
			pg := gw.Split[i].Seconds * 1e6 / float64(gw.Requests)
			sumBare, sumGW = sumBare+pb, sumGW+pg
			t.row(gw.Split[i].Part, strconv.FormatFloat(pb, 'f', 1, 64), strconv.FormatFloat(pg, 'f', 1, 64), fmt.Sprintf("%+.1f", pg-pb))
		}
		t.row("**all**", fmt.Sprintf("**%.1f**", sumBare), fmt.Sprintf("**%.1f**", sumGW), fmt.Sprintf("**%+.1f**", sumGW-sumBare))
		b.WriteString("\n")
		if len(gw.Own) == 0 {
			continue
		}
		b.WriteString("The gateway's own code by package (the leaf-most of its frames in a sample; the standard library, " +
			"fasthttp and runtime work it calls included, allocation excepted):\n\n")
		t.head("package", "Breakwater µs / request")
		for _, p := range gw.Own {
			t.row("`"+p.Part+"`", strconv.FormatFloat(p.Seconds*1e6/float64(gw.Requests), 'f', 2, 64))
		}
		b.WriteString("\n")
		if len(gw.OwnFuncs) > 0 {
			fmt.Fprintf(b, "Its %d largest functions, the same way:\n\n", len(gw.OwnFuncs))
			t.head("function", "Breakwater µs / request")
			for _, p := range gw.OwnFuncs {
				t.row("`"+p.Part+"`", strconv.FormatFloat(p.Seconds*1e6/float64(gw.Requests), 'f', 2, 64))
			}
			b.WriteString("\n")
		}
	}
}
