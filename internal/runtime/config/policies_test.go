package config

import (
	"errors"
	"strings"
	"testing"
)

// pemKey is a PEM public key as a file holds it (its bytes are not checked
// here: the policies package parses it).
const pemKey = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n"

func TestPolicyBundleAndDecisionLogConfig(t *testing.T) {
	src := `
policies:
  bundle:
    url: https://bundles.example.com/breakwater.tar.gz
    poll_interval_ms: 5000
    public_key: env:BUNDLE_KEY
    key_id: ops-2026
    algorithm: ES256
    headers: {Authorization: "env:BUNDLE_TOKEN"}
  decision_log:
    buffer: 500
    file: /var/log/breakwater/decisions.jsonl
    url: https://collector.example.com/logs
    headers: {Authorization: "Bearer s3cret-log"}
` + validProvider
	c, err := parseString(t, src, map[string]string{"BUNDLE_KEY": pemKey, "BUNDLE_TOKEN": "Bearer s3cret-bundle"})
	if err != nil {
		t.Fatal(err)
	}
	b := c.Policies.Bundle
	if b.URL != "https://bundles.example.com/breakwater.tar.gz" || b.PollIntervalMS != 5000 || b.PublicKey.Value() != pemKey ||
		b.KeyID != "ops-2026" || b.Algorithm != "ES256" || b.SigningRequired == nil || !*b.SigningRequired ||
		b.Headers["Authorization"].Value() != "Bearer s3cret-bundle" {
		t.Errorf("bundle %#v", b)
	}
	d := c.Policies.DecisionLog
	if d.Buffer != 500 || d.File != "/var/log/breakwater/decisions.jsonl" || d.FileMaxBytes != DefaultDecisionFileMaxBytes ||
		d.URL != "https://collector.example.com/logs" || d.BatchSize != 100 || d.FlushIntervalMS != 5000 || d.QueueSize != 10000 ||
		d.Headers["Authorization"].Value() != "Bearer s3cret-log" {
		t.Errorf("decision log %#v", d)
	}
	// The bundle's and the decision log's credentials are redacted like the others.
	secrets := strings.Join(c.Secrets(), "|")
	for _, want := range []string{"Bearer s3cret-bundle", "Bearer s3cret-log", pemKey} {
		if !strings.Contains(secrets, want) {
			t.Errorf("Secrets() lacks %q", want)
		}
	}
	// Without a public key signing is not required by default.
	c, err = parseString(t, "policies: {bundle: {url: 'http://127.0.0.1:8181/b.tar.gz'}}\n"+validProvider, nil)
	if err != nil || *c.Policies.Bundle.SigningRequired {
		t.Errorf("no key: %v, signing_required %v", err, c.Policies.Bundle.SigningRequired)
	}
}

func TestPolicyConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, path, msg string
	}{
		{"bundle url", "policies: {bundle: {url: ftp://x}}", "policies.bundle.url", "must be an absolute http:// or https:// URL"},
		{"poll interval", "policies: {bundle: {url: 'https://x.example/b', poll_interval_ms: 10}}", "policies.bundle.poll_interval_ms", "between 1000 and"},
		{"algorithm", "policies: {bundle: {algorithm: RS257}}", "policies.bundle.algorithm", "did you mean RS256?"},
		{"signing without key", "policies: {bundle: {url: 'https://x.example/b', signing_required: true}}", "policies.bundle.signing_required", "needs policies.bundle.public_key"},
		{"key not PEM", "policies: {bundle: {public_key: s3cret-not-pem}}", "policies.bundle.public_key", "must be a PEM public key"},
		{"header name", "policies: {decision_log: {headers: {'bad name': x}}}", "policies.decision_log.headers.bad name", "is not an HTTP header name"},
		{"log url", "policies: {decision_log: {url: 'logs'}}", "policies.decision_log.url", "must be an absolute"},
		{"buffer", "policies: {decision_log: {buffer: -1}}", "policies.decision_log.buffer", "between 1 and 100000"},
		{"file size", "policies: {decision_log: {file_max_bytes: 100}}", "policies.decision_log.file_max_bytes", "between 4096"},
		{"batch", "policies: {decision_log: {batch_size: 20000}}", "policies.decision_log.batch_size", "between 1 and 10000"},
		{"plugin strategy without plugin", "combos: [{name: c, strategy: 'plugin:tod', targets: [{model: p/m}]}]",
			"combos[0].strategy", `strategy "plugin:tod" names no configured plugin`},
		{"plugin strategy without route hook", "plugins: [{name: tod, path: t.wasm, hooks: [classify]}]\ncombos: [{name: c, strategy: 'plugin:tod', targets: [{model: p/m}]}]",
			"combos[0].strategy", `plugin "tod" does not run the route hook (plugins[0].hooks: classify); add route`},
		{"unknown hook", "plugins: [{name: tod, path: t.wasm, hooks: [rout]}]", "plugins[0].hooks[0]", "did you mean route?"},
	} {
		_, err := parseString(t, tc.src+"\n"+validProvider, nil)
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: err = %v", tc.name, err)
			continue
		}
		found := false
		for _, fe := range ve.Errors {
			found = found || (fe.Path == tc.path && strings.Contains(fe.Message, tc.msg))
		}
		if !found {
			t.Errorf("%s: no %s error with %q in\n%v", tc.name, tc.path, tc.msg, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error reveals a secret: %v", tc.name, err)
		}
	}
	// A plugin strategy naming a plugin that runs the route hook, or every
	// hook its module declares, is accepted.
	for _, hooks := range []string{"[route]", "[]"} {
		src := "plugins: [{name: tod, path: t.wasm, hooks: " + hooks + "}]\ncombos: [{name: c, strategy: 'Plugin:tod', targets: [{model: p/m}]}]\n" + validProvider
		if _, err := parseString(t, src, nil); err != nil {
			t.Errorf("hooks %s: %v", hooks, err)
		}
	}
}
