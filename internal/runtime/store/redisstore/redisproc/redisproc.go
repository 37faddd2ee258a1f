// Package redisproc runs real redis-server processes on loopback for the
// tests and the benchmark: a single server, a Cluster of several nodes
// built from the same binary, and a Sentinel watching a server. Servers
// can be stopped, killed, paused and restarted on the same port and
// directory, to play a Redis outage.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long a server takes to answer PING, and a
// Cluster to report cluster_state:ok.
const startTimeout = 15 * time.Second

// Available reports why redis-server cannot be run here (nil: it can).
func Available() error {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return errors.New("redis-server is not on PATH; install it (make test-deps) to run the Redis tests")
	}
	return nil
}

// TB is the part of testing.TB that Require uses.
type TB interface {
	Helper()
	Fatal(args ...any)
	Skip(args ...any)
}

// Require skips t when redis-server cannot run here, or fails it when the
// environment variable CI is "true" (CI must run the Redis tests).
func Require(t TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// Server is one redis-server process. Its methods are goroutine-safe.
type Server struct {
	// Addr is the 127.0.0.1:port the server listens on.
	Addr string
	// Port is Addr's port.
	Port int
	// BusPort is a Cluster node's bus port (0 for other servers).
	BusPort int

	dir  string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs redis-server on a free loopback port with its files in dir
// (created if needed), without persistence unless extra arguments (e.g.
// "--appendonly", "yes") say otherwise, and waits until it answers PING.
func Start(dir string, extra ...string) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	return startOn(dir, port, extra...)
}

func startOn(dir string, port int, extra ...string) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}, extra...)
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Port: port, dir: dir, args: args}
	if err := s.launch(); err != nil {
		return nil, err
	}
	return s, nil
}

// launch starts the process and waits for PING.
func (s *Server) launch() error {
	cmd := exec.Command("redis-server", s.args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	if err := waitPing(s.Addr, done); err != nil {
		s.Kill()
		return fmt.Errorf("redis-server on %s: %w (log: %s)", s.Addr, err, tail(filepath.Join(s.dir, "redis.log")))
	}
	return nil
}

// URL is the server's redis:// URL for database 0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Dir is the server's directory.
func (s *Server) Dir() string { return s.dir }

// Kill stops the server with SIGKILL and waits for it to exit. Killing a
// stopped server does nothing.
func (s *Server) Kill() {
	s.signal(syscall.SIGKILL, true)
}

// Stop shuts the server down with SIGTERM (it writes its append-only file
// if it has one) and waits for it to exit.
func (s *Server) Stop() {
	s.signal(syscall.SIGTERM, true)
}

// Pause freezes the server (SIGSTOP): connections stay open, nothing is
// answered. Resume undoes it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP, false) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, wait bool) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	if wait {
		if sig == syscall.SIGTERM {
			_ = cmd.Process.Signal(syscall.SIGCONT)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
}

// Restart starts the server again on the same port and directory (after
// Stop or Kill; it stops a running one first).
func (s *Server) Restart() error {
	s.Stop()
	return s.launch()
}

// Running reports whether the process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Cluster is a Redis Cluster of primaries only, every node a redis-server
// of this package.
type Cluster struct {
	Nodes []*Server
}

// StartCluster runs n nodes with --cluster-enabled yes under dir, splits
// the 16384 hash slots between them, joins them (CLUSTER MEET) and waits
// until every node reports cluster_state:ok.
func StartCluster(dir string, n int) (*Cluster, error) {
	if n < 1 {
		return nil, errors.New("a cluster needs at least one node")
	}
	c := &Cluster{}
	for i := range n {
		bus, err := FreePort()
		if err != nil {
			c.Close()
			return nil, err
		}
		s, err := Start(filepath.Join(dir, fmt.Sprintf("node%d", i)), "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(bus))
		if err != nil {
			c.Close()
			return nil, err
		}
		s.BusPort = bus
		c.Nodes = append(c.Nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	const slots = 16384
	for i, s := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
		lo, hi := i*slots/n, (i+1)*slots/n-1
		err := cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err()
		if err == nil && i > 0 {
			err = cl.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", c.Nodes[0].Port, c.Nodes[0].BusPort).Err()
		}
		_ = cl.Close()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("forming the cluster on %s: %w", s.Addr, err)
		}
	}
	for _, s := range c.Nodes {
		if err := waitClusterOK(ctx, s.Addr, n); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr
	}
	return out
}

// Close kills every node.
func (c *Cluster) Close() {
	for _, s := range c.Nodes {
		s.Kill()
	}
}

// StartSentinel runs a Sentinel (redis-server --sentinel) under dir that
// monitors master as masterName with quorum 1, declaring it down after
// downAfter without answers.
func StartSentinel(dir string, master *Server, masterName string, downAfter time.Duration) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
		"sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s 5000\n",
		port, dir, filepath.Join(dir, "redis.log"), masterName, master.Port, masterName, downAfter.Milliseconds(), masterName)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		return nil, err
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Port: port, dir: dir, args: []string{conf, "--sentinel"}}
	if err := s.launch(); err != nil {
		return nil, err
	}
	return s, nil
}

// waitPing waits until addr answers PING or the process exits.
func waitPing(addr string, exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, DisableIdentity: true})
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited before answering PING")
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitClusterOK waits until the node at addr reports cluster_state:ok and
// knows n nodes.
func waitClusterOK(ctx context.Context, addr string, n int) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer c.Close()
	want := fmt.Sprintf("cluster_known_nodes:%d", n)
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster node %s not ready: %v %q", addr, err, info)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// FreePort returns a loopback TCP port nobody listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last lines of a log file, for errors.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "none"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}
