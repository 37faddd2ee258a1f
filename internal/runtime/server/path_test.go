package server

import (
	"bytes"
	"testing"

	"github.com/valyala/fasthttp"
)

// requestWith is a request as fasthttp's server reads it: target and Host
// from the request line and headers.
func requestWith(t *testing.T, target, host string) *fasthttp.Request {
	t.Helper()
	var req fasthttp.Request
	req.Header.SetRequestURI(target)
	req.Header.SetHost(host)
	req.Header.SetMethod(fasthttp.MethodPost)
	return &req
}

// The lean path reads a plain request's path without parsing its URI:
// wherever plainPath answers, its path is the one fasthttp's URI parse
// gives (PathOriginal), and a request with a query has none to pass on
// only when plainPath says so. A target or Host it does not vouch for is
// left to the parse.
func TestPlainPathIsTheParsedPath(t *testing.T) {
	targets := []string{"/v1/chat/completions", "/v1/messages", "/v1/chat/completions/", "/V1/Chat/Completions", "/",
		"/v1/chat/completions?beta=true", "/v1/messages#frag", "//v1/chat/completions", "/v1//chat", "/a://b",
		"http://other/v1/chat/completions", "v1/chat/completions", "", "/v1/%63hat/completions", "/v1/chat/../models",
		"/v1/chat\x01completions", "/v1/chat\x7fcompletions", "/v1/ünïcode"}
	hosts := []string{"", "localhost", "localhost:8080", "127.0.0.1:4000", "gw.example.com", "[::1]:8080", "a@b", "host:80x",
		"bad host", "h%41st", "UPPER.Example", "host:", "x_y"}
	plain := 0
	for _, target := range targets {
		for _, host := range hosts {
			req := requestWith(t, target, host)
			p, ok := plainPath(&req.Header)
			parsed := req.URI().PathOriginal()
			if ok {
				plain++
				if !bytes.Equal(p, parsed) {
					t.Errorf("target %q host %q: plain path %q, the parse says %q", target, host, p, parsed)
				}
				if len(req.URI().QueryString()) != 0 {
					t.Errorf("target %q host %q: called plain, but has the query %q", target, host, req.URI().QueryString())
				}
			}
		}
	}
	if plain == 0 {
		t.Fatal("no request was read as plain")
	}
	for _, c := range []struct{ target, host string }{{"/v1/chat/completions", "localhost:8080"}, {"/v1/messages", ""}, {"/", "gw.example.com"}} {
		if _, ok := plainPath(&requestWith(t, c.target, c.host).Header); !ok {
			t.Errorf("target %q host %q: not read as plain", c.target, c.host)
		}
	}
	for _, c := range []struct{ target, host string }{{"/v1/chat/completions?beta=true", "localhost"}, {"/v1/chat/completions", "[::1]:8080"},
		{"/v1/chat/completions", "host:80x"}, {"//v1/chat/completions", ""}} {
		if _, ok := plainPath(&requestWith(t, c.target, c.host).Header); ok {
			t.Errorf("target %q host %q: read as plain", c.target, c.host)
		}
	}
}

// requestHost is the host fasthttp's URI parse gives (Request.Host), for
// every target and Host, whether or not it parses the URI itself.
func TestRequestHostIsTheParsedHost(t *testing.T) {
	targets := []string{"/v1/chat/completions", "/v1/messages?beta=true", "//v1/chat", "http://other.example/v1/chat/completions",
		"HTTP://Other.Example:81/x", "v1/chat", "", "/a\x01b"}
	hosts := []string{"", "localhost", "LocalHost:8080", "127.0.0.1:4000", "gw.example.com", "GW.EXAMPLE.COM", "[::1]:8080",
		"[::1]", "a@b", "u:p@Host:1", "host:80x", "bad host", "h%41st", "host:", "x_y", "evil.example:443"}
	fast := 0
	for _, target := range targets {
		for _, host := range hosts {
			got := string(requestHost(requestWith(t, target, host)))
			want := string(requestWith(t, target, host).Host())
			if got != want {
				t.Errorf("target %q host %q: requestHost %q, the parse says %q", target, host, got, want)
			}
			req := requestWith(t, target, host)
			if _, ok := plainPath(&req.Header); ok && !hasUpper(req.Header.Host()) {
				fast++
			}
		}
	}
	if fast == 0 {
		t.Fatal("no host was read without the parse")
	}
}
