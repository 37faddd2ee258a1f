package redisstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topologies of Options.Mode.
const (
	ModeSingle   = "single"
	ModeSentinel = "sentinel"
	ModeCluster  = "cluster"
)

// Defaults of Options.
const (
	// DefaultKeyPrefix namespaces every key Breakwater writes to Redis.
	DefaultKeyPrefix = "breakwater:"
	// DefaultTimeout bounds one Redis call (dial, read, write, pool wait).
	DefaultTimeout = time.Second
	// DefaultCheckInterval is how often Watch compares the version
	// counters, the repair of a missed change notice.
	DefaultCheckInterval = time.Second
)

// poolSize is the connection pool size per node: bursts of failures on
// several providers at once each hold a connection for one round trip.
const poolSize = 64

// Options configure Open. The zero value of every field but the address
// means its default.
type Options struct {
	// Mode is ModeSingle (default), ModeSentinel or ModeCluster.
	Mode string
	// URL is the single server's redis://, rediss:// or unix:// URL
	// (ModeSingle); its user, password, database and TLS apply unless
	// the fields below set them.
	URL string
	// Addrs are the Sentinel addresses (ModeSentinel) or the Cluster
	// seed nodes (ModeCluster), host:port each.
	Addrs []string
	// MasterName is the Sentinel master name (ModeSentinel).
	MasterName string
	// Username and Password are the ACL credentials of the data nodes.
	Username, Password string
	// SentinelUsername and SentinelPassword authenticate to the Sentinels
	// when they differ from the data nodes' (ModeSentinel).
	SentinelUsername, SentinelPassword string
	// DB selects a database (ModeSingle and ModeSentinel; Cluster has
	// only 0). Negative keeps the URL's.
	DB int
	// TLS, when set, encrypts every connection.
	TLS *tls.Config
	// KeyPrefix namespaces the keys (DefaultKeyPrefix). It must not
	// contain '{' or '}'.
	KeyPrefix string
	// Timeout bounds each call (DefaultTimeout).
	Timeout time.Duration
	// CheckInterval is Watch's version check period (DefaultCheckInterval).
	CheckInterval time.Duration
}

// withDefaults fills the defaults and checks the options. Errors never
// contain a password.
func (o Options) withDefaults() (Options, error) {
	if o.Mode == "" {
		o.Mode = ModeSingle
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if strings.ContainsAny(o.KeyPrefix, "{}") {
		return o, fmt.Errorf("redisstore: key prefix %q must not contain '{' or '}'", o.KeyPrefix)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = DefaultCheckInterval
	}
	switch o.Mode {
	case ModeSingle:
		if o.URL == "" {
			return o, errors.New("redisstore: a URL is required for a single server")
		}
	case ModeSentinel:
		if len(o.Addrs) == 0 || o.MasterName == "" {
			return o, errors.New("redisstore: Sentinel needs its addresses and the master name")
		}
	case ModeCluster:
		if len(o.Addrs) == 0 {
			return o, errors.New("redisstore: Cluster needs at least one seed address")
		}
	default:
		return o, fmt.Errorf("redisstore: unknown mode %q (want %s, %s or %s)", o.Mode, ModeSingle, ModeSentinel, ModeCluster)
	}
	return o, nil
}

// client builds the go-redis client of the topology, with every timeout
// bounded by o.Timeout and no long retry loops: a call fails fast and the
// store reports the outage instead.
func (o Options) client() (redis.UniversalClient, error) {
	switch o.Mode {
	case ModeSingle:
		ro, err := redis.ParseURL(o.URL)
		if err != nil {
			safe := redactURL(o.URL)
			return nil, fmt.Errorf("redisstore: invalid redis URL %s: %s", safe, scrub(err.Error(), o.URL, safe))
		}
		if o.Username != "" {
			ro.Username = o.Username
		}
		if o.Password != "" {
			ro.Password = o.Password
		}
		if o.DB > 0 {
			ro.DB = o.DB
		}
		if o.TLS != nil {
			ro.TLSConfig = o.TLS
		}
		ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout, ro.PoolTimeout = o.Timeout, o.Timeout, o.Timeout, o.Timeout
		ro.DialerRetries, ro.MaxRetries = 1, 1
		ro.PoolSize = poolSize
		ro.ContextTimeoutEnabled = true
		ro.DisableIdentity = true
		return redis.NewClient(ro), nil
	default:
		uo := &redis.UniversalOptions{
			Addrs:                 o.Addrs,
			Username:              o.Username,
			Password:              o.Password,
			SentinelUsername:      o.SentinelUsername,
			SentinelPassword:      o.SentinelPassword,
			TLSConfig:             o.TLS,
			DialTimeout:           o.Timeout,
			ReadTimeout:           o.Timeout,
			WriteTimeout:          o.Timeout,
			PoolTimeout:           o.Timeout,
			DialerRetries:         1,
			MaxRetries:            1,
			PoolSize:              poolSize,
			ContextTimeoutEnabled: true,
			DisableIdentity:       true,
		}
		if o.DB > 0 {
			uo.DB = o.DB
		}
		if o.Mode == ModeSentinel {
			uo.MasterName = o.MasterName
			if uo.SentinelUsername == "" && uo.SentinelPassword == "" {
				uo.SentinelUsername, uo.SentinelPassword = o.Username, o.Password
			}
		} else {
			uo.IsClusterMode = true
			// Enough redirects to follow a resharding or a failover.
			uo.MaxRedirects = 8
		}
		return redis.NewUniversalClient(uo), nil
	}
}

// describe names the server(s) for logs and errors, without credentials.
func (o Options) describe() string {
	switch o.Mode {
	case ModeSingle:
		return redactURL(o.URL)
	case ModeSentinel:
		return "sentinel " + o.MasterName + "@" + strings.Join(o.Addrs, ",")
	default:
		return "cluster " + strings.Join(o.Addrs, ",")
	}
}
