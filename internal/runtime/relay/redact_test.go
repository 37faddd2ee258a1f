package relay

import (
	"bytes"
	"strings"
	"testing"
)

// An upstream error event relayed after the commit point goes through
// Config.Redact: a key the upstream quotes never reaches the client.
func TestCommittedErrorEventIsRedacted(t *testing.T) {
	const key = "sk-ant-api03-Secret0123456789abcdefXYZ"
	cfg := anthropicCfg(CommitFirstByte)
	cfg.Redact = func(b []byte) []byte { return bytes.ReplaceAll(b, []byte(key), []byte("[redacted]")) }
	h := newHarness(t, cfg)
	c, rc := h.relaying(anStart)
	h.send(anBlockText, anText)
	h.write("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key: " + key + "\"}}\n\n")
	r := recvResult(t, rc)
	assertFailure(t, r.Failure, ReasonUpstreamErrorEvent, 502, true)
	out := c.String()
	if strings.Contains(out, key) || !strings.Contains(out, "invalid x-api-key: [redacted]") {
		t.Fatalf("client got %q", out)
	}
}
