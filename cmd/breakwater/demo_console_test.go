package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemoPrintsTheConsoleAndAWorkingToken (issue 17, `make run`): `serve`
// with no configuration (the embedded demo) prints the console's URL,
// /dashboard on the address it listens on, and an admin token for the run;
// the console page is served there, and the token printed authenticates
// the admin API while no token or another one is refused with 401.
func TestDemoPrintsTheConsoleAndAWorkingToken(t *testing.T) {
	addr, out := startDemo(t, "Admin token for this run:", "--demo-traffic=false")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	console := regexp.MustCompile(`(?m)^Console: (\S+)$`).FindStringSubmatch(out)
	if console == nil || console[1] != "http://"+addr+"/dashboard" {
		t.Fatalf("the demo printed no console URL http://%s/dashboard:\n%s", addr, out)
	}
	token := regexp.MustCompile(`(?m)^Admin token for this run: (\S+)$`).FindStringSubmatch(out)
	if token == nil || len(token[1]) < 16 {
		t.Fatalf("the demo printed no admin token:\n%s", out)
	}

	get := func(url string, hdr ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := get(console[1]); st != 200 || !strings.Contains(strings.ToLower(body), "<html") {
		t.Fatalf("GET %s: %d %.200s", console[1], st, body)
	}
	health := "http://" + addr + "/api/monitoring/health"
	if st, body := get(health, "Authorization", "Bearer "+token[1]); st != 200 || !strings.Contains(body, `"providers"`) {
		t.Fatalf("the printed token on the admin API: %d %.300s", st, body)
	}
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer " + token[1] + "x"}} {
		if st, body := get(health, hdr...); st != 401 {
			t.Fatalf("admin API with %v: %d %.200s, want 401", hdr, st, body)
		}
	}
}

// startDemo runs `serve` with no configuration (the embedded demo) on a
// free port with args, stopped when t ends, and returns its address and
// what it printed up to the first line containing until.
func startDemo(t *testing.T, until string, args ...string) (addr, printed string) {
	t.Helper()
	addr = freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	cmd := exec.CommandContext(ctx, binPath, append([]string{"serve", "--listen", addr}, args...)...)
	cmd.Dir = t.TempDir() // no ./breakwater.yaml here
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait(); cancel() })
	sc := bufio.NewScanner(stdout)
	var out strings.Builder
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), until) {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return addr, out.String()
}
