package config

import (
	"maps"
	"net/url"
	"slices"
)

// GoString redacts the secret for the %#v verb, so no fmt verb that uses a
// method prints the value.
func (s Secret) GoString() string {
	if s == "" {
		return `""`
	}
	return `"[redacted]"`
}

// Secrets returns every configured credential value, for redact.New: the
// admin token, the Redis URL, every connection's API key and proxy URL,
// every client key, the policy bundle's key and headers and the decision
// log's headers, and the passwords inside the two URLs. Empty values are
// left out; the order is the file's (map values sorted by key).
func (c *Config) Secrets() []string {
	var out []string
	add := func(s Secret) {
		if s == "" {
			return
		}
		out = append(out, string(s))
		if u, err := url.Parse(string(s)); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok && pw != "" {
				out = append(out, pw)
			}
		}
	}
	add(c.Server.AdminToken)
	add(c.State.RedisURL)
	// The Redis passwords; the ACL user names are Secret-typed for their
	// env:/file: references but are not secrets to redact.
	add(c.State.RedisPassword)
	add(c.State.RedisSentinelPassword)
	for _, p := range c.Providers {
		for _, cn := range p.Connections {
			add(cn.APIKey)
			add(cn.ProxyURL)
		}
	}
	for _, k := range c.Keys {
		add(k.Key)
	}
	add(c.Policies.Bundle.PublicKey)
	for _, h := range []map[string]Secret{c.Policies.Bundle.Headers, c.Policies.DecisionLog.Headers} {
		for _, k := range slices.Sorted(maps.Keys(h)) {
			add(h[k])
		}
	}
	return out
}
