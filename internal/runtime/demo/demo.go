// Package demo is the embedded demo: a configuration that routes to an
// in-process mock upstream, so a new user sees the gateway answer with no
// keys and no network.
package demo

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed demo.yaml
var demoYAML string

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

// Curl returns a ready-to-paste command that streams a chat completion
// from the demo gateway at addr.
func Curl(addr string) string {
	return fmt.Sprintf(`curl -N http://%s/v1/chat/completions \
  -H 'Content-Type: application/json' \
  -d '{"model": "demo-combo", "stream": true, "messages": [{"role": "user", "content": "Hello, Breakwater!"}]}'`, addr)
}
