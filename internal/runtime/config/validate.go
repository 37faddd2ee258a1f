package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
)

// Limits used by validation, in milliseconds unless named otherwise; the
// engine's clamps where it has them.
const (
	dayMS             = 86400000
	maxComboWaitMS    = int64(strategy.MaxWaitCeiling / time.Millisecond)
	maxComboAttempts  = strategy.MaxAttemptsCeiling
	maxQueueDepth     = admission.MaxQueueDepth
	maxAttemptsLimit  = 100
	maxBreakerFailure = engine.MaxBreakerFailureThreshold
	maxConcurrency    = engine.MaxConcurrency
)

// validator checks a defaulted Config and collects every problem, locating
// each at the position its value came from.
type validator struct {
	file string
	pos  map[string]position
	skip map[string]bool // paths already reported as undecodable
	errs []FieldError
}

// Validate checks c, which should already have its defaults applied (see
// ApplyDefaults), and returns a *ValidationError listing every problem, or
// nil. Errors carry paths but no file positions; Parse and Load locate them.
func (c *Config) Validate() error {
	v := &validator{}
	v.config(c)
	return finish(v.errs)
}

// errorf records a problem of the value at path, located at the nearest
// recorded position of path or one of its ancestors.
func (v *validator) errorf(p, format string, args ...any) {
	for q := p; ; q = parentPath(q) {
		if v.skip[q] {
			return
		}
		if q == "" {
			break
		}
	}
	fe := FieldError{Path: p, Message: fmt.Sprintf(format, args...)}
	for q := p; ; q = parentPath(q) {
		if pos, ok := v.pos[q]; ok {
			if pos.env != "" {
				fe.Message += fmt.Sprintf(" (set by environment variable %s)", pos.env)
			} else {
				fe.File, fe.Line, fe.Column = v.file, pos.line, pos.col
			}
			break
		}
		if q == "" {
			fe.File = v.file
			break
		}
	}
	v.errs = append(v.errs, fe)
}

// parentPath drops the last segment of a dotted path ("a.b[2]" → "a.b").
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// rangeCheck reports val outside lo..hi.
func (v *validator) rangeCheck(p string, val, lo, hi int64) {
	if val < lo || val > hi {
		v.errorf(p, "must be between %d and %d (got %d)", lo, hi, val)
	}
}

// positive reports val < 1.
func (v *validator) positive(p string, val int64) {
	if val < 1 {
		v.errorf(p, "must be greater than 0 (got %d)", val)
	}
}

// nonNegative reports val < 0.
func (v *validator) nonNegative(p string, val int64) {
	if val < 0 {
		v.errorf(p, "must not be negative (got %d)", val)
	}
}

// enum reports val not in set, with a hint when it looks like a typo.
func (v *validator) enum(p, val string, set []string) {
	if oneOf(val, set) {
		return
	}
	msg := fmt.Sprintf("must be one of %s (got %q)", strings.Join(set, ", "), val)
	known := make(map[string]bool, len(set))
	for _, s := range set {
		known[s] = true
	}
	if s := suggest(val, known); s != "" {
		msg += fmt.Sprintf("; did you mean %s?", s)
	}
	v.errorf(p, "%s", msg)
}

func (v *validator) config(c *Config) {
	v.server(c)
	v.state(&c.State)
	conns := v.providers(c.Providers)
	v.combos(c.Combos, c.Plugins)
	v.keys(c.Keys, conns)
	v.resilience(&c.Resilience)
	v.emergencyTargets(c)
	v.policies(&c.Policies)
	v.plugins(c.Plugins)
}

func (v *validator) server(c *Config) {
	s := &c.Server
	host, err := splitListen(s.Listen)
	if err != nil {
		v.errorf("server.listen", "must be host:port, e.g. 127.0.0.1:8080 (got %q): %v", s.Listen, err)
	} else if len(c.Keys) == 0 && !IsLoopback(host) {
		shown := host
		if shown == "" {
			shown = "(empty: all interfaces)"
		} else {
			shown = strconv.Quote(shown)
		}
		v.errorf("server.listen", "host %s is not a loopback address and no client keys are configured: "+
			"the gateway would accept unauthenticated requests from the network; "+
			"listen on 127.0.0.1/::1/localhost or add client keys", shown)
	}
	v.positive("server.max_request_bytes", s.MaxRequestBytes)
	v.rangeCheck("server.connect_timeout_ms", s.ConnectTimeoutMS, 1, dayMS)
	v.rangeCheck("server.first_byte_timeout_ms", s.FirstByteTimeoutMS, 1, dayMS)
	v.rangeCheck("server.idle_timeout_ms", s.IdleTimeoutMS, 1, dayMS)
	v.rangeCheck("server.request_deadline_ms", s.RequestDeadlineMS, 1000, dayMS)
	v.rangeCheck("server.write_timeout_ms", s.WriteTimeoutMS, 100, dayMS)
	if s.MaxInflightBodyBytes < s.MaxRequestBytes {
		v.errorf("server.max_inflight_body_bytes", "must be at least server.max_request_bytes (%d), or one request could never be admitted (got %d)",
			s.MaxRequestBytes, s.MaxInflightBodyBytes)
	}
}

// splitListen validates a host:port listen address and returns the host.
func splitListen(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("port %q is not a number in 0..65535", port)
	}
	if host != "" && net.ParseIP(stripZone(host)) == nil && !validHostname(host) {
		return "", fmt.Errorf("host %q is neither an IP address nor a host name", host)
	}
	return host, nil
}

func stripZone(host string) string {
	h, _, _ := strings.Cut(host, "%")
	return h
}

// validHostname reports whether h is a syntactically valid DNS name.
func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// IsLoopback reports whether a host (no port) only reaches this machine:
// an IP in 127.0.0.0/8 or ::1, or "localhost". An empty host (all
// interfaces) and other names are not loopback.
func IsLoopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(stripZone(host))
	return ip != nil && ip.IsLoopback()
}

func (v *validator) state(s *State) {
	v.enum("state.backend", s.Backend, backends)
	switch s.Backend {
	case BackendBadger:
		if s.Path == "" {
			v.errorf("state.path", "must not be empty with the badger backend")
		}
	case BackendRedis:
		v.redis(s)
	}
}

// redis validates the redis_* keys of the redis backend.
func (v *validator) redis(s *State) {
	mode := s.RedisMode
	if mode == "" {
		mode = RedisSingle
	}
	v.enum("state.redis_mode", mode, redisModes)
	switch mode {
	case RedisSingle:
		if s.RedisURL == "" {
			v.errorf("state.redis_url", "is required with the redis backend")
		} else if u, err := url.Parse(s.RedisURL.Value()); err != nil || !oneOf(u.Scheme, []string{"redis", "rediss", "unix"}) {
			v.errorf("state.redis_url", "must be a redis://, rediss:// or unix:// URL (value not shown)")
		}
		if len(s.RedisAddrs) > 0 {
			v.errorf("state.redis_addrs", "is for redis_mode sentinel or cluster; a single server is given by redis_url")
		}
	case RedisSentinel, RedisCluster:
		if s.RedisURL != "" {
			v.errorf("state.redis_url", "is for a single server; redis_mode %s takes redis_addrs", mode)
		}
		if len(s.RedisAddrs) == 0 {
			v.errorf("state.redis_addrs", "is required with redis_mode %s (host:port of each %s)", mode,
				map[string]string{RedisSentinel: "Sentinel", RedisCluster: "seed node"}[mode])
		}
		for i, a := range s.RedisAddrs {
			if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
				v.errorf(fmt.Sprintf("state.redis_addrs[%d]", i), "must be host:port (got %q)", a)
			}
		}
	}
	switch {
	case mode == RedisSentinel && s.RedisMasterName == "":
		v.errorf("state.redis_master_name", "is required with redis_mode sentinel")
	case mode != RedisSentinel && s.RedisMasterName != "":
		v.errorf("state.redis_master_name", "is only used with redis_mode sentinel")
	}
	if mode == RedisCluster && s.RedisDB != 0 {
		v.errorf("state.redis_db", "must be 0 with redis_mode cluster (a Cluster has one database)")
	}
	v.rangeCheck("state.redis_db", int64(s.RedisDB), 0, 1<<20)
	if (s.RedisTLSCertFile == "") != (s.RedisTLSKeyFile == "") {
		v.errorf("state.redis_tls_cert_file", "and redis_tls_key_file must be given together (a client certificate and its key)")
	}
	if strings.ContainsAny(s.RedisKeyPrefix, "{}") {
		v.errorf("state.redis_key_prefix", "must not contain '{' or '}' (they delimit Redis Cluster hash tags)")
	}
	if s.RedisTimeoutMS != 0 {
		v.rangeCheck("state.redis_timeout_ms", s.RedisTimeoutMS, 10, 60000)
	}
}

// providers validates the providers and returns the set of their
// "provider/connection" ids.
func (v *validator) providers(ps []Provider) map[string]bool {
	conns := make(map[string]bool)
	ids := make(map[string]int)
	for i := range ps {
		p := &ps[i]
		pp := fmt.Sprintf("providers[%d]", i)
		switch {
		case p.ID == "":
			v.errorf(pp+".id", "is required")
		case strings.Contains(p.ID, "/"):
			v.errorf(pp+".id", "must not contain \"/\" (got %q): clients address models as provider/model", p.ID)
		default:
			if j, dup := ids[p.ID]; dup {
				v.errorf(pp+".id", "duplicate provider id %q (also providers[%d])", p.ID, j)
			} else {
				ids[p.ID] = i
			}
		}
		v.enum(pp+".kind", p.Kind, kinds)
		if oneOf(p.Kind, kinds) {
			if _, err := provider.For(p.Kind, provider.Options{ResponsesAPI: p.ResponsesAPI}); err != nil {
				v.errorf(pp+".responses_api", "%s", strings.TrimPrefix(err.Error(), "responses_api: "))
			}
		}
		v.enum(pp+".profile", p.Profile, profiles)
		v.rangeCheck(pp+".max_concurrent", int64(p.MaxConcurrent), 0, maxConcurrency)
		v.httpURL(pp+".base_url", p.BaseURL)
		v.models(pp, p)
		v.connections(pp, p, conns)
	}
	return conns
}

// httpURL checks an absolute http(s) URL with a host.
func (v *validator) httpURL(p, raw string) {
	if raw == "" {
		v.errorf(p, "is required")
		return
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.errorf(p, "must be an absolute http:// or https:// URL (got %q)", raw)
	}
}

func (v *validator) models(pp string, p *Provider) {
	if len(p.Models) == 0 {
		v.errorf(pp+".models", "at least one model is required")
	}
	seen := make(map[string]bool)
	for j, m := range p.Models {
		mp := fmt.Sprintf("%s.models[%d]", pp, j)
		switch {
		case m == "":
			v.errorf(mp, "must not be empty")
		case seen[m]:
			v.errorf(mp, "duplicate model %q", m)
		}
		seen[m] = true
	}
	for _, fam := range slices.Sorted(maps.Keys(p.QuotaFamilies)) {
		patterns := p.QuotaFamilies[fam]
		fp := pp + ".quota_families." + fam
		if fam == "" {
			v.errorf(fp, "family name must not be empty")
		}
		if len(patterns) == 0 {
			v.errorf(fp, "at least one model pattern is required")
		}
		for k, pat := range patterns {
			if _, err := path.Match(pat, ""); err != nil || pat == "" {
				v.errorf(fmt.Sprintf("%s[%d]", fp, k), "invalid model pattern %q", pat)
			}
		}
	}
}

func (v *validator) connections(pp string, p *Provider, all map[string]bool) {
	if len(p.Connections) == 0 {
		v.errorf(pp+".connections", "at least one connection is required")
	}
	ids := make(map[string]int)
	for j := range p.Connections {
		c := &p.Connections[j]
		cp := fmt.Sprintf("%s.connections[%d]", pp, j)
		switch {
		case c.ID == "":
			v.errorf(cp+".id", "is required")
		case strings.Contains(c.ID, "/"):
			v.errorf(cp+".id", "must not contain \"/\" (got %q)", c.ID)
		default:
			if k, dup := ids[c.ID]; dup {
				v.errorf(cp+".id", "duplicate connection id %q in provider %q (also connections[%d])", c.ID, p.ID, k)
			} else {
				ids[c.ID] = j
				all[p.ID+"/"+c.ID] = true
			}
		}
		v.nonNegative(cp+".max_concurrent", int64(c.MaxConcurrent))
		if c.LocalAddress != "" && net.ParseIP(c.LocalAddress) == nil {
			v.errorf(cp+".local_address", "must be an IP address (got %q)", c.LocalAddress)
		}
		if c.ProxyURL != "" {
			u, err := url.Parse(c.ProxyURL.Value())
			if err != nil || !oneOf(u.Scheme, []string{"http", "https", "socks5", "socks5h"}) || u.Host == "" {
				v.errorf(cp+".proxy_url", "must be an http://, https://, socks5:// or socks5h:// URL with a host (value not shown)")
			}
		}
		o := &c.RateLimitOverrides
		op := cp + ".rate_limit_overrides"
		v.nonNegative(op+".max_concurrent", int64(o.MaxConcurrent))
		for _, m := range slices.Sorted(maps.Keys(o.ModelConcurrency)) {
			limit := o.ModelConcurrency[m]
			if limit < 1 {
				v.errorf(op+".model_concurrency."+m, "must be a positive integer (got %d)", limit)
			}
		}
		v.rangeCheck(op+".max_wait_ms", o.MaxWaitMS, 0, dayMS)
		v.rangeCheck(op+".execution_max_wait_ms", o.ExecutionMaxWaitMS, 0, dayMS)
		v.rangeCheck(op+".max_queue_depth", int64(o.MaxQueueDepth), 0, maxQueueDepth)
	}
}

func (v *validator) combos(cs []Combo, plugins []Plugin) {
	names := make(map[string]int)
	for i := range cs {
		c := &cs[i]
		cp := fmt.Sprintf("combos[%d]", i)
		switch {
		case c.Name == "":
			v.errorf(cp+".name", "is required")
		case strings.Contains(c.Name, "/"):
			v.errorf(cp+".name", "must not contain \"/\" (got %q): provider/model names are reserved", c.Name)
		default:
			if j, dup := names[c.Name]; dup {
				v.errorf(cp+".name", "duplicate combo name %q (also combos[%d])", c.Name, j)
			} else {
				names[c.Name] = i
			}
		}
		if name, ok := pluginStrategy(c.Strategy); ok {
			v.pluginStrategy(cp+".strategy", name, plugins)
		} else {
			v.enum(cp+".strategy", c.Strategy, strategies)
		}
		v.nonNegative(cp+".sticky_limit", int64(c.StickyLimit))
		if c.Mode != "" {
			v.enum(cp+".mode", c.Mode, []string{"flatten", "execute"})
		}
		if c.Strategy == "fusion" && c.Judge == "" {
			v.errorf(cp+".judge", "is required for strategy fusion")
		}
		if c.Strategy == "context-relay" && c.Summariser == "" {
			v.errorf(cp+".summariser", "is required for strategy context-relay")
		}
		v.nonNegative(cp+".max_parallel", int64(c.MaxParallel))
		for k, w := range c.AutoWeights {
			switch k {
			case "health", "latency", "cost", "headroom", "context":
			default:
				v.errorf(cp+".auto_weights."+k, "unknown factor (want health, latency, cost, headroom or context)")
			}
			if w < 0 {
				v.errorf(cp+".auto_weights."+k, "must not be negative (got %g)", w)
			}
		}
		if len(c.Targets) == 0 {
			v.errorf(cp+".targets", "at least one target is required")
		}
		for j, t := range c.Targets {
			tp := fmt.Sprintf("%s.targets[%d]", cp, j)
			if t.Model == "" {
				v.errorf(tp+".model", "must not be empty")
			}
			for _, f := range []struct {
				name string
				val  float64
			}{{"weight", t.Weight}, {"price_in", t.PriceIn}, {"price_out", t.PriceOut}} {
				if f.val < 0 {
					v.errorf(tp+"."+f.name, "must not be negative (got %g)", f.val)
				}
			}
			v.nonNegative(tp+".context_window", int64(t.ContextWindow))
		}
	}
	v.comboCycles(cs, names)
}

// comboCycles rejects combos that reach themselves through targets naming
// other combos (docs/resilience.md §13: circular references are rejected at load).
func (v *validator) comboCycles(cs []Combo, names map[string]int) {
	const (
		unvisited = iota
		active
		done
	)
	state := make([]int, len(cs))
	var stack []string
	var visit func(i int)
	visit = func(i int) {
		state[i] = active
		stack = append(stack, cs[i].Name)
		for j, t := range cs[i].Targets {
			k, ok := names[t.Model]
			if !ok {
				continue
			}
			switch state[k] {
			case active:
				start := 0
				for s, n := range stack {
					if n == t.Model {
						start = s
					}
				}
				cycle := append(append([]string{}, stack[start:]...), t.Model)
				v.errorf(fmt.Sprintf("combos[%d].targets[%d].model", i, j),
					"circular combo reference: %s", strings.Join(cycle, " -> "))
			case unvisited:
				visit(k)
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
	}
	for i := range cs {
		if idx, ok := names[cs[i].Name]; ok && idx == i && state[i] == unvisited {
			visit(i)
		}
	}
}

func (v *validator) keys(ks []Key, conns map[string]bool) {
	ids := make(map[string]int)
	values := make(map[Secret]int)
	for i := range ks {
		k := &ks[i]
		kp := fmt.Sprintf("keys[%d]", i)
		if k.ID == "" {
			v.errorf(kp+".id", "is required")
		} else if j, dup := ids[k.ID]; dup {
			v.errorf(kp+".id", "duplicate key id %q (also keys[%d])", k.ID, j)
		} else {
			ids[k.ID] = i
		}
		if k.Key == "" {
			v.errorf(kp+".key", "is required")
		} else if j, dup := values[k.Key]; dup {
			v.errorf(kp+".key", "same key value as keys[%d] (value not shown)", j)
		} else {
			values[k.Key] = i
		}
		for j, c := range k.AllowedConnections {
			if !conns[c] {
				v.errorf(fmt.Sprintf("%s.allowed_connections[%d]", kp, j),
					"unknown connection %q: expected provider/connection of a configured connection", c)
			}
		}
	}
}

func (v *validator) plugins(ps []Plugin) {
	names := make(map[string]int)
	for i, p := range ps {
		pp := fmt.Sprintf("plugins[%d]", i)
		if p.Name == "" {
			v.errorf(pp+".name", "is required")
		} else if j, dup := names[p.Name]; dup {
			v.errorf(pp+".name", "duplicate plugin name %q (also plugins[%d])", p.Name, j)
		} else {
			names[p.Name] = i
		}
		if p.Path == "" {
			v.errorf(pp+".path", "is required")
		}
		for j, h := range p.Hooks {
			v.enum(fmt.Sprintf("%s.hooks[%d]", pp, j), h, pluginHooks)
		}
	}
}

// pluginStrategy returns the plugin a "plugin:<name>" strategy names (the
// prefix in any case), and false for any other strategy.
func pluginStrategy(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) <= len(PluginStrategyPrefix) || !strings.EqualFold(s[:len(PluginStrategyPrefix)], PluginStrategyPrefix) {
		return "", false
	}
	return s[len(PluginStrategyPrefix):], true
}

// pluginStrategy checks that the plugin a combo strategy names is
// configured and runs the route hook (a plugin without hooks runs every
// hook its module declares: the gateway checks at load).
func (v *validator) pluginStrategy(p, name string, plugins []Plugin) {
	i := slices.IndexFunc(plugins, func(pl Plugin) bool { return pl.Name == name })
	switch {
	case i < 0:
		v.errorf(p, "strategy %q names no configured plugin (plugins[].name)", PluginStrategyPrefix+name)
	case len(plugins[i].Hooks) > 0 && !slices.Contains(plugins[i].Hooks, "route"):
		v.errorf(p, "plugin %q does not run the route hook (plugins[%d].hooks: %s); add route", name, i,
			strings.Join(plugins[i].Hooks, ", "))
	}
}

// policies checks the policies section: the directory, the bundle server
// and the decision log.
func (v *validator) policies(pc *Policies) {
	if pc.Dir == "" {
		v.errorf("policies.dir", "must not be empty")
	}
	v.rangeCheck("policies.eval_timeout_ms", pc.EvalTimeoutMS, 1, 60000)
	b := &pc.Bundle
	const bp = "policies.bundle"
	if b.URL != "" {
		v.httpURL(bp+".url", b.URL)
	}
	v.rangeCheck(bp+".poll_interval_ms", b.PollIntervalMS, 1000, dayMS)
	v.enum(bp+".algorithm", b.Algorithm, bundleAlgorithms)
	if b.SigningRequired != nil && *b.SigningRequired && b.PublicKey == "" {
		v.errorf(bp+".signing_required", "needs policies.bundle.public_key to verify signatures")
	}
	if b.PublicKey != "" && !strings.HasPrefix(b.Algorithm, "HS") && !strings.Contains(b.PublicKey.Value(), "-----BEGIN ") {
		v.errorf(bp+".public_key", "must be a PEM public key or certificate for %s (value not shown)", b.Algorithm)
	}
	v.headerNames(bp+".headers", b.Headers)
	d := &pc.DecisionLog
	const dp = "policies.decision_log"
	v.rangeCheck(dp+".buffer", int64(d.Buffer), 1, 100000)
	v.rangeCheck(dp+".file_max_bytes", d.FileMaxBytes, 4096, 1<<40)
	if d.URL != "" {
		v.httpURL(dp+".url", d.URL)
	}
	v.headerNames(dp+".headers", d.Headers)
	v.rangeCheck(dp+".batch_size", int64(d.BatchSize), 1, 10000)
	v.rangeCheck(dp+".flush_interval_ms", d.FlushIntervalMS, 100, dayMS)
	v.rangeCheck(dp+".queue_size", int64(d.QueueSize), 1, 1000000)
}

// headerNames checks that every key of h is an HTTP header name.
func (v *validator) headerNames(p string, h map[string]Secret) {
	for _, k := range slices.Sorted(maps.Keys(h)) {
		if k == "" || strings.ContainsFunc(k, func(r rune) bool {
			return r <= ' ' || r >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r)
		}) {
			v.errorf(p+"."+k, "is not an HTTP header name")
		}
	}
}

func (v *validator) resilience(r *Resilience) {
	const rp = "resilience"
	for _, name := range slices.Sorted(maps.Keys(r.CircuitBreaker)) {
		b := r.CircuitBreaker[name]
		bp := rp + ".circuit_breaker." + name
		if !oneOf(name, profiles) {
			v.enum(bp, name, profiles)
			continue
		}
		v.rangeCheck(bp+".failure_threshold", int64(b.FailureThreshold), 1, maxBreakerFailure)
		if b.DegradationThreshold < 0 || b.DegradationThreshold > b.FailureThreshold {
			v.errorf(bp+".degradation_threshold", "must be between 0 and failure_threshold (%d) (got %d)",
				b.FailureThreshold, b.DegradationThreshold)
		}
		v.rangeCheck(bp+".reset_ms", b.ResetMS, 1000, dayMS)
		for _, k := range []struct {
			name string
			ms   int64
		}{{"server_error", b.CooldownByKind.ServerErrorMS}, {"timeout", b.CooldownByKind.TimeoutMS},
			{"transport", b.CooldownByKind.TransportMS}, {"rate_limit", b.CooldownByKind.RateLimitMS}} {
			if k.ms != 0 {
				v.rangeCheck(bp+".cooldown_by_kind."+k.name, k.ms, 1000, dayMS)
			}
		}
		v.rangeCheck(bp+".degraded_exit_successes", int64(b.DegradedExitSuccesses), 1, 1000)
		v.rangeCheck(bp+".max_backoff_multiplier", int64(b.MaxBackoffMultiplier), 1, 1024)
	}
	for name, g := range map[string]GateProfile{ProfileAPIKey: r.ProviderCooldown.APIKey, ProfileOAuth: r.ProviderCooldown.OAuth, ProfileLocal: r.ProviderCooldown.Local} {
		gp := rp + ".provider_cooldown." + name
		v.rangeCheck(gp+".failure_threshold", int64(g.FailureThreshold), 1, maxBreakerFailure)
		v.rangeCheck(gp+".failure_window_ms", g.FailureWindowMS, 1000, dayMS)
		v.rangeCheck(gp+".cooldown_ms", g.CooldownMS, 1000, dayMS)
	}
	for _, name := range slices.Sorted(maps.Keys(r.ConnectionCooldown)) {
		cd := r.ConnectionCooldown[name]
		cp := rp + ".connection_cooldown." + name
		if !oneOf(name, profiles) {
			v.enum(cp, name, profiles)
			continue
		}
		v.rangeCheck(cp+".base_ms", cd.BaseMS, 1, dayMS)
		v.rangeCheck(cp+".max_backoff_level", int64(cd.MaxBackoffLevel), 0, 30)
	}

	ml := &r.ModelLockout
	mp := rp + ".model_lockout"
	for i, code := range ml.ErrorCodes {
		v.rangeCheck(fmt.Sprintf("%s.error_codes[%d]", mp, i), int64(code), 100, 599)
	}
	v.rangeCheck(mp+".base_cooldown_ms", ml.BaseCooldownMS, 1, dayMS)
	v.rangeCheck(mp+".max_cooldown_ms", ml.MaxCooldownMS, 1, dayMS)
	if ml.MaxCooldownMS < ml.BaseCooldownMS {
		v.errorf(mp+".max_cooldown_ms", "must be at least base_cooldown_ms (%d) (got %d)", ml.BaseCooldownMS, ml.MaxCooldownMS)
	}
	v.rangeCheck(mp+".max_backoff_steps", int64(ml.MaxBackoffSteps), 0, 30)

	cw := &r.ComboCooldownWait
	cwp := rp + ".combo_cooldown_wait"
	v.rangeCheck(cwp+".max_wait_ms", cw.MaxWaitMS, 1, maxComboWaitMS)
	v.rangeCheck(cwp+".max_attempts", int64(cw.MaxAttempts), 1, maxComboAttempts)
	v.rangeCheck(cwp+".budget_ms", cw.BudgetMS, 1, dayMS)

	rq := &r.RequestQueue
	qp := rp + ".request_queue"
	v.rangeCheck(qp+".max_wait_ms", rq.MaxWaitMS, 1, dayMS)
	v.rangeCheck(qp+".execution_max_wait_ms", rq.ExecutionMaxWaitMS, 1, dayMS)
	v.rangeCheck(qp+".max_queue_depth", int64(rq.MaxQueueDepth), 0, maxQueueDepth)
	v.rangeCheck(rp+".concurrency.global", int64(r.Concurrency.Global), 0, maxConcurrency)

	sr := &r.StreamRecovery
	sp := rp + ".stream_recovery"
	v.rangeCheck(sp+".content_stall_timeout_ms", sr.ContentStallTimeoutMS, 0, dayMS)
	v.rangeCheck(sp+".hard_deadline_ms", sr.HardDeadlineMS, 0, dayMS)
	tw := &sr.ThroughputWatchdog
	tp := sp + ".throughput_watchdog"
	v.rangeCheck(tp+".warmup_ms", tw.WarmupMS, 0, dayMS)
	v.rangeCheck(tp+".window_ms", tw.WindowMS, 1000, dayMS)
	v.positive(tp+".min_useful_bytes_per_second", tw.MinUsefulBytesPerSecond)
	v.positive(tp+".min_useful_bytes", tw.MinUsefulBytes)

	v.rangeCheck(rp+".session_affinity_ttl_ms", r.SessionAffinityTTLMS, 0, dayMS)
	v.rangeCheck(rp+".max_attempts_per_request", int64(r.MaxAttemptsPerRequest), 1, maxAttemptsLimit)
}

// emergencyTargets checks that every resilience.emergency_fallback.targets
// entry is "provider/model" of a configured provider that lists the model.
func (v *validator) emergencyTargets(c *Config) {
	for i, t := range c.Resilience.EmergencyFallback.Targets {
		p := fmt.Sprintf("resilience.emergency_fallback.targets[%d]", i)
		pid, model, ok := strings.Cut(t, "/")
		if !ok || pid == "" || model == "" {
			v.errorf(p, "must be provider/model (got %q)", t)
			continue
		}
		idx := slices.IndexFunc(c.Providers, func(pc Provider) bool { return pc.ID == pid })
		switch {
		case idx < 0:
			v.errorf(p, "unknown provider %q", pid)
		case !slices.Contains(c.Providers[idx].Models, model):
			v.errorf(p, "provider %q does not list model %q", pid, model)
		}
	}
}
