package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/accesslog"
)

// TestAccessLinesFollowTheLogFlags: the access writer the binary builds
// beside its logger writes to the same output, in the --log-format the
// logger uses, under the logger name breakwater.access, and only when
// --log-level lets info through.
func TestAccessLinesFollowTheLogFlags(t *testing.T) {
	line := accesslog.Line{RequestID: "r1", Model: "m", Provider: "p", Connection: "c", Attempts: 1, Status: 200}
	for _, tc := range []struct {
		format, level string
		want          bool
	}{{"text", "info", true}, {"text", "debug", true}, {"json", "info", true}, {"text", "warn", false}, {"json", "error", false}} {
		var out bytes.Buffer
		g := &globalFlags{logFormat: tc.format, logLevel: tc.level}
		log, access, err := g.loggers(&out)
		if err != nil {
			t.Fatal(err)
		}
		log.Error("before")
		if access.IsInfo() != tc.want {
			t.Fatalf("%s/%s: IsInfo %v", tc.format, tc.level, access.IsInfo())
		}
		access.Request(line)
		log.Error("after")
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if !tc.want {
			if len(lines) != 2 {
				t.Fatalf("%s/%s: access line written: %q", tc.format, tc.level, out.String())
			}
			continue
		}
		if len(lines) != 3 || !strings.Contains(lines[2], "after") {
			t.Fatalf("%s/%s: want the logger's line, the access line (written before the logger's next line) and the logger's line, got %q", tc.format, tc.level, out.String())
		}
		if tc.format == "text" {
			if !strings.Contains(lines[1], " [INFO]  breakwater.access: request: request_id=r1 model=m provider=p connection=c attempts=1 status=200 code=\"\" stream=false upstream_ms=0 total_ms=0") {
				t.Fatalf("text access line %q", lines[1])
			}
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(lines[1]), &doc); err != nil || doc["@module"] != "breakwater.access" || doc["@level"] != "info" || doc["status"] != float64(200) {
			t.Fatalf("json access line %q: %v", lines[1], err)
		}
	}
	if _, _, err := (&globalFlags{logFormat: "xml", logLevel: "info"}).loggers(nil); err == nil {
		t.Fatal("an unknown --log-format must be refused")
	}
}
