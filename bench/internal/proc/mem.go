package proc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memory is a process's resident memory, in bytes, from /proc/PID/status.
type Memory struct {
	// RSS is VmRSS: the resident set now.
	RSS int64
	// Peak is VmHWM: the highest resident set since the process started.
	Peak int64
}

// ReadMemory reads VmRSS and VmHWM of pid (Linux only).
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, fmt.Errorf("reading memory of pid %d: %w", pid, err)
	}
	defer f.Close()
	m, err := ParseStatus(f)
	if err != nil {
		return Memory{}, fmt.Errorf("reading memory of pid %d: %w", pid, err)
	}
	return m, nil
}

// ParseStatus extracts VmRSS and VmHWM from the text of /proc/PID/status
// ("VmHWM:\t   12345 kB"). Both lines must be present.
func ParseStatus(r io.Reader) (Memory, error) {
	var m Memory
	var haveRSS, havePeak bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) != 2 || fields[1] != "kB" {
			return Memory{}, fmt.Errorf("unexpected %s line %q", key, sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("parsing %s: %w", key, err)
		}
		if key == "VmRSS" {
			m.RSS, haveRSS = kb*1024, true
		} else {
			m.Peak, havePeak = kb*1024, true
		}
	}
	if err := sc.Err(); err != nil {
		return Memory{}, fmt.Errorf("scanning status: %w", err)
	}
	if !haveRSS || !havePeak {
		return Memory{}, fmt.Errorf("status lacks VmRSS or VmHWM")
	}
	return m, nil
}

// clockTicks is USER_HZ, the unit of utime/stime in /proc/PID/stat; 100 on
// every mainstream Linux build.
const clockTicks = 100

// ReadCPU returns the user+system CPU time pid has used (Linux only).
func ReadCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading CPU time of pid %d: %w", pid, err)
	}
	d, err := ParseStat(string(data))
	if err != nil {
		return 0, fmt.Errorf("reading CPU time of pid %d: %w", pid, err)
	}
	return d, nil
}

// ParseStat extracts utime+stime from the text of /proc/PID/stat. The
// command name (field 2) may contain spaces and parentheses, so fields are
// counted from the last ')'.
func ParseStat(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	// After ")": field 3 (state) is fields[0]; utime is field 14, stime 15.
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("stat has %d fields after the command, want ≥ 13", len(fields))
	}
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing utime: %w", err)
	}
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing stime: %w", err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// Sampler records the highest VmRSS of a process, read every interval,
// between NewSampler and Stop. It is goroutine-safe.
type Sampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	maxRSS  int64
	samples int
}

// NewSampler starts sampling pid's VmRSS every interval.
func NewSampler(pid int, interval time.Duration) *Sampler {
	s := &Sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run(interval)
	return s
}

func (s *Sampler) run(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-s.stop:
			s.sample()
			return
		case <-t.C:
		}
	}
}

func (s *Sampler) sample() {
	m, err := ReadMemory(s.pid)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxRSS = max(s.maxRSS, m.RSS)
	s.samples++
}

// Stop ends sampling and returns the highest VmRSS seen (bytes) and the
// number of samples taken. Call it once.
func (s *Sampler) Stop() (maxRSS int64, samples int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxRSS, s.samples
}
