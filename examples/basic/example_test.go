// Package basic checks that the example configuration loads.
package basic

import (
	"os"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
)

func TestExampleConfigLoads(t *testing.T) {
	data, err := os.ReadFile("breakwater.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"BREAKWATER_ADMIN_TOKEN": "admin-example", "OPENAI_KEY_A": "sk-a", "OPENAI_KEY_B": "sk-b", "ANTHROPIC_KEY": "sk-ant",
	}
	cfg, err := config.ParseWithOptions(data, "breakwater.yaml", config.Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatalf("example config: %v", err)
	}
	topo, err := topology.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(topo.ModelIDs(), ","); got != "anthropic/claude-haiku-4,openai/gpt-4o,openai/gpt-4o-mini,smart" {
		t.Fatalf("models %s", got)
	}
	if cfg.Providers[0].Connections[1].APIKey.Value() != "sk-b" {
		t.Fatal("env: secret not resolved")
	}
}
