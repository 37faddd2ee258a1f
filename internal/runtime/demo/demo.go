// Package demo is the embedded demo: a configuration that routes to an
// in-process mock upstream whose script makes some calls fail, and a
// gentle stream of background requests, so a new user sees the gateway
// answer, fail over and recover with no keys and no network.
package demo

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

//go:embed demo.yaml
var demoYAML string

//go:embed mock.yaml
var mockYAML string

// Config returns the demo configuration YAML pointing at the mock upstream
// at mockURL (e.g. "http://127.0.0.1:41234") and listening on listen (empty
// keeps the default 127.0.0.1:8080).
func Config(mockURL, listen string) []byte {
	y := strings.ReplaceAll(demoYAML, "MOCK_URL", strings.TrimRight(mockURL, "/"))
	if listen != "" {
		y = strings.Replace(y, "listen: 127.0.0.1:8080", "listen: "+listen, 1)
	}
	return []byte(y)
}

// Script returns the demo mock's script: demo-a rate limited now and
// then, demo-flaky failing three calls in five.
func Script() *mock.Script {
	s, err := mock.ParseScript([]byte(mockYAML))
	if err != nil {
		panic(fmt.Sprintf("demo: the embedded mock script is invalid: %v", err)) // a build defect, caught by the tests
	}
	return s
}

// Curl returns a ready-to-paste command that streams a chat completion
// from the demo gateway at addr.
func Curl(addr string) string {
	return fmt.Sprintf(`curl -N http://%s/v1/chat/completions \
  -H 'Content-Type: application/json' \
  -d '{"model": "demo-combo", "stream": true, "messages": [{"role": "user", "content": "Hello, Breakwater!"}]}'`, addr)
}
