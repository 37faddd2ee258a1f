package gateway

import (
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/plugins"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/redact"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
)

// PolicyOptions turns the configuration's policies section into the
// pipeline's options: the operator directory, or the bundle server when
// policies.bundle.url is set, the evaluation deadline, the redactor of the
// configured credentials, and the decision log (the ring
// buffer always; the file and the service when configured). The decision
// log's OPA events carry the labels app=breakwater and version.
func PolicyOptions(cfg *config.Config, st engine.Store, host *plugins.Host, red *redact.Redactor, o Options) policies.Options {
	po := policies.Options{Store: st, Dir: cfg.Policies.Dir, Plugins: host, Clock: o.Clock,
		EvalTimeout: time.Duration(cfg.Policies.EvalTimeoutMS) * time.Millisecond,
		Redactor:    red}
	if o.Logger != nil {
		po.Logger = o.Logger.Named("policies")
	}
	if b := cfg.Policies.Bundle; b.URL != "" {
		po.Bundle = &policies.BundleOptions{
			URL:             b.URL,
			PollInterval:    time.Duration(b.PollIntervalMS) * time.Millisecond,
			PublicKey:       b.PublicKey.Value(),
			KeyID:           b.KeyID,
			Algorithm:       b.Algorithm,
			SigningRequired: b.SigningRequired != nil && *b.SigningRequired,
			Headers:         secretValues(b.Headers),
		}
	}
	d := cfg.Policies.DecisionLog
	po.DecisionLog = &policies.DecisionLogOptions{
		Buffer:        d.Buffer,
		File:          d.File,
		FileMaxBytes:  d.FileMaxBytes,
		URL:           d.URL,
		Headers:       secretValues(d.Headers),
		BatchSize:     d.BatchSize,
		FlushInterval: time.Duration(d.FlushIntervalMS) * time.Millisecond,
		QueueSize:     d.QueueSize,
	}
	if o.Version != "" {
		po.DecisionLog.Labels = map[string]string{"version": o.Version}
	}
	return po
}

// secretValues resolves a map of secrets.
func secretValues(m map[string]config.Secret) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v.Value()
	}
	return out
}
