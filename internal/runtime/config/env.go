package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// EnvPrefix starts the name of every environment override.
const EnvPrefix = "BREAKWATER_"

// envSections are the config sections whose settings have env overrides.
var envSections = []string{"server", "state", "policies", "resilience"}

// envTarget is one environment override: the variable and the field it sets.
type envTarget struct {
	name  string
	path  string
	steps []envStep
}

// envStep is one step from the Config root to a field: a struct field index,
// or a key of a per-profile map.
type envStep struct {
	field int
	key   string
	isKey bool
}

// EnvVars lists, sorted, the names of every environment override Parse and
// Load honour: BREAKWATER_<SECTION>_<KEY> for each scalar setting of the
// server, state, policies and resilience sections (nested blocks and
// per-profile map entries join with underscores, e.g.
// BREAKWATER_RESILIENCE_CONNECTION_COOLDOWN_OAUTH_BASE_MS), plus the
// aliases of envAliases: BREAKWATER_CIRCUIT_BREAKER_<PROFILE>_<KEY> of
// docs/resilience.md §1, BREAKWATER_PROVIDER_COOLDOWN_<PROFILE>_<KEY> of
// §1b and BREAKWATER_EMERGENCY_FALLBACK of §14.
func EnvVars() []string {
	var names []string
	for _, t := range envTargets() {
		names = append(names, t.name)
	}
	slices.Sort(names)
	return names
}

// envAliases are the specification's own names of some overrides. An
// entry whose name is "" gives every override under path (a prefix) a
// second name without the RESILIENCE_ part
// (BREAKWATER_CIRCUIT_BREAKER_<PROFILE>_<KEY>); an entry with a name gives
// the override at path exactly that second name.
var envAliases = []struct{ path, name string }{
	{path: "resilience.circuit_breaker."},                                                   // docs/resilience.md §1
	{path: "resilience.provider_cooldown."},                                                 // §1b
	{path: "resilience.emergency_fallback.enabled", name: EnvPrefix + "EMERGENCY_FALLBACK"}, // §14
}

// envTargets derives the overrides from the yaml tags of Config. The
// aliases of envAliases come last so they win over the derived spelling.
func envTargets() []envTarget {
	var out []envTarget
	root := reflect.TypeFor[Config]()
	for i := range root.NumField() {
		name := yamlName(root.Field(i))
		if !slices.Contains(envSections, name) {
			continue
		}
		collectEnv(root.Field(i).Type, EnvPrefix+strings.ToUpper(name), name,
			[]envStep{{field: i}}, &out)
	}
	derived := len(out)
	for _, a := range envAliases {
		for _, t := range out[:derived] {
			switch {
			case a.name == "" && strings.HasPrefix(t.path, a.path):
				t.name = strings.Replace(t.name, EnvPrefix+"RESILIENCE_", EnvPrefix, 1)
			case a.name != "" && t.path == a.path:
				t.name = a.name
			default:
				continue
			}
			out = append(out, t)
		}
	}
	return out
}

func collectEnv(t reflect.Type, name, path string, steps []envStep, out *[]envTarget) {
	switch {
	case isEnvScalar(t):
		*out = append(*out, envTarget{name: name, path: path, steps: steps})
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			y := yamlName(t.Field(i))
			if y == "" {
				continue
			}
			collectEnv(t.Field(i).Type, name+"_"+strings.ToUpper(y), path+"."+y,
				append(slices.Clip(steps), envStep{field: i}), out)
		}
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.Struct:
		// Per-profile maps (circuit_breaker, connection_cooldown).
		for _, p := range profiles {
			collectEnv(t.Elem(), name+"_"+strings.ToUpper(p), path+"."+p,
				append(slices.Clip(steps), envStep{key: p, isKey: true}), out)
		}
	}
}

// isEnvScalar reports whether a field of type t can be set from one
// environment variable. Lists of integers or strings are comma-separated.
func isEnvScalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Float64:
		return true
	case reflect.Pointer:
		return t.Elem().Kind() == reflect.Bool
	case reflect.Slice:
		return t.Elem().Kind() == reflect.Int || t.Elem().Kind() == reflect.String
	}
	return false
}

// applyEnv applies every set, non-empty override to c, recording errors and
// the variable as the source of each overridden value.
func (d *decoder) applyEnv(c *Config) {
	root := reflect.ValueOf(c).Elem()
	for _, t := range envTargets() {
		raw, ok := d.lookupEnv(t.name)
		if !ok || raw == "" {
			continue
		}
		err := setAt(root, t.steps, func(v reflect.Value) error { return d.setFromEnv(v, raw) })
		if err != nil {
			d.bad[t.path] = true
			d.errs = append(d.errs, FieldError{
				Path:    t.path,
				Message: fmt.Sprintf("environment variable %s: %v", t.name, err),
			})
			continue
		}
		d.pos[t.path] = position{env: t.name}
	}
}

// setAt walks steps from v and calls set on the field reached, creating
// per-profile map entries as needed.
func setAt(v reflect.Value, steps []envStep, set func(reflect.Value) error) error {
	if len(steps) == 0 {
		return set(v)
	}
	s := steps[0]
	if !s.isKey {
		return setAt(v.Field(s.field), steps[1:], set)
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	key := reflect.ValueOf(s.key).Convert(v.Type().Key())
	elem := reflect.New(v.Type().Elem()).Elem()
	if old := v.MapIndex(key); old.IsValid() {
		elem.Set(old)
	}
	if err := setAt(elem, steps[1:], set); err != nil {
		return err
	}
	v.SetMapIndex(key, elem)
	return nil
}

// setFromEnv parses raw into v by v's type. Errors never include a secret.
func (d *decoder) setFromEnv(v reflect.Value, raw string) error {
	if v.Type() == secretType {
		val, err := d.resolveSecret(raw)
		if err != nil {
			return err
		}
		v.SetString(val)
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(raw)
	case reflect.Bool:
		b, err := parseEnvBool(raw)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Pointer:
		b, err := parseEnvBool(raw)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(&b))
	case reflect.Int, reflect.Int64:
		i, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil || v.OverflowInt(i) {
			return fmt.Errorf("expected an integer (got %q)", raw)
		}
		v.SetInt(i)
	case reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil {
			return fmt.Errorf("expected a number (got %q)", raw)
		}
		v.SetFloat(f)
	case reflect.Slice:
		parts := strings.Split(raw, ",")
		s := reflect.MakeSlice(v.Type(), 0, len(parts))
		if v.Type().Elem().Kind() == reflect.String {
			for _, p := range parts {
				if p = strings.TrimSpace(p); p != "" {
					s = reflect.Append(s, reflect.ValueOf(p).Convert(v.Type().Elem()))
				}
			}
			v.Set(s)
			return nil
		}
		for _, p := range parts {
			i, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
			if err != nil {
				return fmt.Errorf("expected comma-separated integers (got %q)", raw)
			}
			s = reflect.Append(s, reflect.ValueOf(int(i)))
		}
		v.Set(s)
	default:
		return fmt.Errorf("unsupported field type %s", v.Type())
	}
	return nil
}

// parseEnvBool accepts true/false, 1/0, yes/no and on/off, in any case.
func parseEnvBool(raw string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("expected a boolean: true or false (got %q)", raw)
}

// Plain environment variables the specification names beside the
// BREAKWATER_* overrides (docs/configuration.md). They are read once, by
// Parse and Load, into Config.Env.
const (
	EnvRateLimitMaxWait          = "RATE_LIMIT_MAX_WAIT_MS"
	EnvRateLimitExecutionMaxWait = "RATE_LIMIT_EXECUTION_MAX_WAIT_MS"
	EnvRateLimitMaxQueueDepth    = "RATE_LIMIT_MAX_QUEUE_DEPTH"
	EnvRateLimitAutoEnable       = "RATE_LIMIT_AUTO_ENABLE"
	EnvStreamContentStall        = "STREAM_CONTENT_STALL_TIMEOUT_MS"
	EnvStreamThroughputWatchdog  = "STREAM_THROUGHPUT_WATCHDOG_ENABLED"
)

// Env is what the plain environment variables say. A nil field is unset.
// The request queue budgets are the lowest layer of docs/resilience.md §7
// (env default < persisted setting < per-connection override); the stream
// variables win over the stream_recovery settings.
type Env struct {
	// RateLimitMaxWaitMS is RATE_LIMIT_MAX_WAIT_MS, the default of
	// request_queue.max_wait_ms.
	RateLimitMaxWaitMS *int64
	// RateLimitExecutionMaxWaitMS is RATE_LIMIT_EXECUTION_MAX_WAIT_MS, the
	// default of request_queue.execution_max_wait_ms.
	RateLimitExecutionMaxWaitMS *int64
	// RateLimitMaxQueueDepth is RATE_LIMIT_MAX_QUEUE_DEPTH, the default of
	// request_queue.max_queue_depth.
	RateLimitMaxQueueDepth *int
	// RateLimitAutoEnable is RATE_LIMIT_AUTO_ENABLE; it wins over the saved
	// request_queue.auto_enable_api_key_providers.
	RateLimitAutoEnable *bool
	// StreamContentStallTimeoutMS is STREAM_CONTENT_STALL_TIMEOUT_MS: a
	// positive value is both content-stall budgets, 0 disables the
	// watchdog.
	StreamContentStallTimeoutMS *int64
	// StreamThroughputWatchdog is STREAM_THROUGHPUT_WATCHDOG_ENABLED.
	StreamThroughputWatchdog *bool
	// Ignored describes each variable whose value was ignored, as the
	// specification asks for junk in STREAM_CONTENT_STALL_TIMEOUT_MS; the
	// gateway logs them at start.
	Ignored []string
}

// readEnv resolves the plain environment variables into c.Env. A value
// that does not parse is an error naming the variable and the setting it
// gives the default of, except STREAM_CONTENT_STALL_TIMEOUT_MS, whose junk
// or negative values are ignored (docs/resilience.md §9).
func (d *decoder) readEnv(c *Config) {
	get := func(name string) (string, bool) {
		v, ok := d.lookupEnv(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	fail := func(name, path, want, raw string) {
		d.errs = append(d.errs, FieldError{Path: path,
			Message: fmt.Sprintf("environment variable %s: expected %s (got %q)", name, want, raw)})
	}
	millis := func(name, path string) *int64 {
		raw, ok := get(name)
		if !ok {
			return nil
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 || n > dayMS {
			fail(name, path, fmt.Sprintf("an integer of milliseconds between 0 and %d", dayMS), raw)
			return nil
		}
		return &n
	}
	e := &c.Env
	e.RateLimitMaxWaitMS = millis(EnvRateLimitMaxWait, "resilience.request_queue.max_wait_ms")
	e.RateLimitExecutionMaxWaitMS = millis(EnvRateLimitExecutionMaxWait, "resilience.request_queue.execution_max_wait_ms")
	if raw, ok := get(EnvRateLimitMaxQueueDepth); ok {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 || n > maxQueueDepth {
			fail(EnvRateLimitMaxQueueDepth, "resilience.request_queue.max_queue_depth", fmt.Sprintf("an integer between 0 and %d", maxQueueDepth), raw)
		} else {
			e.RateLimitMaxQueueDepth = &n
		}
	}
	boolean := func(name, path string) *bool {
		raw, ok := get(name)
		if !ok {
			return nil
		}
		b, err := parseEnvBool(raw)
		if err != nil {
			fail(name, path, "a boolean: true or false, on or off, 1 or 0", raw)
			return nil
		}
		return &b
	}
	e.RateLimitAutoEnable = boolean(EnvRateLimitAutoEnable, "resilience.request_queue.auto_enable_api_key_providers")
	e.StreamThroughputWatchdog = boolean(EnvStreamThroughputWatchdog, "resilience.stream_recovery.throughput_watchdog.enabled")
	if raw, ok := get(EnvStreamContentStall); ok {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 || n > dayMS {
			e.Ignored = append(e.Ignored, fmt.Sprintf("%s=%q ignored: not an integer of milliseconds between 0 and %d", EnvStreamContentStall, raw, dayMS))
		} else {
			e.StreamContentStallTimeoutMS = &n
		}
	}
}
