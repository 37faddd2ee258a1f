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
	addr := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "serve", "--listen", addr, "--demo-traffic=false")
	cmd.Dir = t.TempDir() // no ./breakwater.yaml here
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()

	sc := bufio.NewScanner(stdout)
	var printed strings.Builder
	for sc.Scan() {
		printed.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "Admin token for this run:") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	out := printed.String()
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
