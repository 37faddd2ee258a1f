// Package cluster keeps one gateway instance in step with the others that
// share its Redis state store (docs/deployment.md). It watches the store's
// change notices and hands each changed key to the part that keeps it in
// memory: the engine (breakers, window gates, cooldowns, lockouts,
// settings), the policy pipeline (operator rules), the server (combos
// defined through the admin API, rate-limit protection flags, admission
// settings, cached session pins) and the plugin host (reloads). When
// notices may have been missed — at start, after a lost subscription or a
// gap found by the store's version check, after a Redis outage — it
// reloads all of them. Leases need nothing: they are read from the store
// on every use.
//
// With a single-instance store (Badger, memory) Start does nothing.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/plugins"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/runtime/metrics"
	"github.com/breakwater-dev/breakwater/internal/runtime/server"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore"
)

// PluginReloadKey is the store key an instance writes after reloading its
// plugins through the admin API; every other instance reloads its own
// plugin files when it changes.
const PluginReloadKey = "plugins/reload"

// applyTimeout bounds the store reads of one change or one resync.
const applyTimeout = 10 * time.Second

// Options are the parts Start connects. Store, Engine, Server and Logger
// are required.
type Options struct {
	Store    engine.Store
	Engine   *engine.Engine
	Server   *server.Server
	Policies *policies.Pipeline
	Plugins  *plugins.Host
	// Metrics, when set, gets the store metrics (breakwater_store_*).
	Metrics *metrics.Metrics
	// Logger is the sync's own, named by the caller ("cluster").
	Logger hclog.Logger
}

// Sync is a running cluster sync. Close stops it.
type Sync struct {
	store *redisstore.Store
	o     Options
	log   hclog.Logger
	m     *syncMetrics

	mu         sync.Mutex
	pluginMark string // the PluginReloadKey value last applied or written

	cancel context.CancelFunc
	done   chan struct{}
}

// Start begins watching o.Store when it is shared by several instances
// (the Redis store) and returns nil otherwise. It returns once the
// subscription is in place and the local views were reloaded from the
// store, or after a few seconds when Redis does not answer (the sync then
// catches up when it does).
func Start(o Options) (*Sync, error) {
	rs, ok := o.Store.(*redisstore.Store)
	if !ok {
		return nil, nil
	}
	if o.Engine == nil || o.Server == nil || o.Logger == nil {
		return nil, errors.New("cluster: Store, Engine, Server and Logger are required")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sync{store: rs, o: o, log: o.Logger, cancel: cancel, done: make(chan struct{})}
	if o.Metrics != nil {
		s.m = newSyncMetrics(rs)
		if err := s.m.register(o.Metrics.Registry()); err != nil {
			cancel()
			return nil, err
		}
	}
	if mark, ok, err := rs.Get(ctx, PluginReloadKey); err == nil && ok {
		s.pluginMark = string(mark)
	}
	o.Plugins.OnReload(s.announcePluginReload)
	ready := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(s.done)
		err := rs.Watch(ctx, func(c engine.Change) error {
			err := s.apply(ctx, c)
			if c.Kind == engine.ChangeResync {
				once.Do(func() { close(ready) })
			}
			return err
		})
		if err != nil {
			s.log.Error("watching the state store stopped", "error", err)
		}
	}()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		s.log.Warn("the first sync with the state store is taking long; serving meanwhile")
	}
	return s, nil
}

// Close stops watching the store and waits for the engine's background
// writes to reach it. It is safe on a nil Sync.
func (s *Sync) Close() {
	if s == nil {
		return
	}
	s.o.Plugins.OnReload(nil)
	s.cancel()
	<-s.done
	s.o.Engine.Flush()
}

// apply hands one change to the parts that keep it.
func (s *Sync) apply(ctx context.Context, c engine.Change) error {
	ctx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	switch c.Kind {
	case engine.ChangeKey:
		err := s.applyKey(ctx, c.Key)
		if err == nil && s.m != nil && !c.SentAt.IsZero() {
			s.m.propagation.Observe(max(time.Since(c.SentAt), 0).Seconds())
		}
		return err
	case engine.ChangeResync:
		if s.m != nil {
			s.m.resyncs.Inc()
		}
		return s.resync(ctx)
	case engine.ChangeDown:
		s.log.Warn("lost the state store: routing continues on this instance's view; changes are kept and written back when it returns", "error", c.Err)
	case engine.ChangeUp:
		s.log.Info("the state store is back: resynchronising")
	}
	return nil
}

// applyKey re-reads one changed key into whichever part keeps it.
func (s *Sync) applyKey(ctx context.Context, key string) error {
	if handled, err := s.o.Engine.LoadKey(ctx, key); handled {
		if err != nil || key != engine.SettingsKey {
			return err
		}
	}
	switch key {
	case policies.OperatorRulesKey:
		if s.o.Policies == nil {
			return nil
		}
		_, err := s.o.Policies.ReloadOperatorRules(ctx)
		return err
	case PluginReloadKey:
		return s.reloadPlugins(ctx)
	}
	_, err := s.o.Server.StoreChanged(ctx, key)
	return err
}

// resync reloads every local view from the store.
func (s *Sync) resync(ctx context.Context) error {
	t0 := time.Now()
	var errs []error
	errs = append(errs, s.o.Engine.Resync(ctx))
	if s.o.Policies != nil {
		_, err := s.o.Policies.ReloadOperatorRules(ctx)
		errs = append(errs, err)
	}
	errs = append(errs, s.o.Server.StoreResync(ctx), s.reloadPlugins(ctx))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.log.Debug("local view resynchronised with the state store", "took", time.Since(t0).Round(time.Microsecond).String())
	return nil
}

// reloadPlugins reloads the plugin files when another instance announced
// a reload this one has not applied.
func (s *Sync) reloadPlugins(ctx context.Context) error {
	mark, ok, err := s.store.Get(ctx, PluginReloadKey)
	if err != nil || !ok {
		return err
	}
	s.mu.Lock()
	same := string(mark) == s.pluginMark
	s.pluginMark = string(mark)
	s.mu.Unlock()
	if same {
		return nil
	}
	if err := s.o.Plugins.ReloadFromPeer(ctx); err != nil {
		return fmt.Errorf("reloading plugins as another instance did: %w", err)
	}
	s.log.Info("plugins reloaded as another instance did")
	return nil
}

// announcePluginReload is the plugin host's OnReload hook: it writes a
// fresh PluginReloadKey so the other instances reload too.
func (s *Sync) announcePluginReload(ctx context.Context) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	mark := hex.EncodeToString(b[:])
	s.mu.Lock()
	s.pluginMark = mark
	s.mu.Unlock()
	if err := s.store.Put(ctx, PluginReloadKey, []byte(mark), 0); err != nil {
		s.log.Error("telling the other instances about the plugin reload failed", "error", err)
	}
}

// syncMetrics are the store metrics of shared mode.
type syncMetrics struct {
	store       *redisstore.Store
	propagation prometheus.Histogram
	resyncs     prometheus.Counter
	up          *prometheus.Desc
	outages     *prometheus.Desc
	trips       *prometheus.Desc
}

func newSyncMetrics(rs *redisstore.Store) *syncMetrics {
	const ns = "breakwater"
	return &syncMetrics{
		store: rs,
		propagation: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "store_propagation_seconds",
			Help:    "Delay from another instance's state change to this instance applying it (the two clocks' skew included).",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, 1, 5}}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "store_resyncs_total",
			Help: "Full reloads of the local view from the shared state store (start, missed notices, after an outage)."}),
		up:      prometheus.NewDesc(ns+"_store_up", "1 while the shared state store answers, 0 during an outage.", nil, nil),
		outages: prometheus.NewDesc(ns+"_store_outages_total", "Times the shared state store became unreachable.", nil, nil),
		trips:   prometheus.NewDesc(ns+"_store_round_trips_total", "Calls (commands, scripts, pipelines) sent to the shared state store.", nil, nil),
	}
}

func (m *syncMetrics) register(r *prometheus.Registry) error {
	for _, c := range []prometheus.Collector{m.propagation, m.resyncs, m} {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("cluster: registering metrics: %w", err)
		}
	}
	return nil
}

// Describe implements prometheus.Collector.
func (m *syncMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.up
	ch <- m.outages
	ch <- m.trips
}

// Collect implements prometheus.Collector.
func (m *syncMetrics) Collect(ch chan<- prometheus.Metric) {
	st := m.store.Status()
	up := 0.0
	if st.Up {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(m.outages, prometheus.CounterValue, float64(st.Outages))
	ch <- prometheus.MustNewConstMetric(m.trips, prometheus.CounterValue, float64(m.store.RoundTrips()))
}
