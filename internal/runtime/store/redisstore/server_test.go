package redisstore

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// testServer is the redis-server process TestMain started, or why there is
// none.
var testServer struct {
	url        string
	skipReason string
}

func TestMain(m *testing.M) {
	os.Exit(runWithServer(m))
}

func runWithServer(m *testing.M) int {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "redisstore tests: redis-server is not on PATH and CI=true; install redis-server")
			return 1
		}
		testServer.skipReason = "redis-server is not on PATH; install it (apt-get install redis-server) to run the Redis store tests"
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "breakwater-redis-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start redis-server:", err)
		return 1
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	testServer.url = fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	if err := waitForPing(testServer.url, 10*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "redis-server did not answer PING:", err)
		return 1
	}
	return m.Run()
}

// requireServer returns the test server's URL or skips t.
func requireServer(t testing.TB) string {
	t.Helper()
	if testServer.skipReason != "" {
		t.Skip(testServer.skipReason)
	}
	return testServer.url
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitForPing(url string, within time.Duration) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	opts.MaxRetries = -1
	c := redis.NewClient(opts)
	defer c.Close()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
