package pprofserve

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestPprofLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", ":0", "example.com:0", "127.0.0.1"} {
		if stop, err := Start(addr, hclog.NewNullLogger()); err == nil {
			stop()
			t.Errorf("Start(%q) accepted a non-loopback address", addr)
		}
	}
}

func TestPprofServesProfiles(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	stop, err := Start(addr, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatalf("GET /debug/pprof/: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "allocs") {
		t.Fatalf("GET /debug/pprof/ = %s, body lacks the profile list", resp.Status)
	}
}
