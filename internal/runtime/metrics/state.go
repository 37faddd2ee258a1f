package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/plugins"
)

// breakerStateValue maps a breaker state to the gauge value.
var breakerStateValue = map[string]float64{"CLOSED": 0, "DEGRADED": 1, "OPEN": 2, "HALF_OPEN": 3}

// engineCollector reads the engine's health at scrape time: breaker state
// per provider, cooling and terminal connections, active lockouts by
// reason. Reading applies the engine's lazy recovery, so an expired breaker
// shows as HALF_OPEN.
type engineCollector struct {
	eng      *engine.Engine
	breaker  *prometheus.Desc
	failures *prometheus.Desc
	cooling  *prometheus.Desc
	terminal *prometheus.Desc
	lockouts *prometheus.Desc
}

// RegisterEngine adds the engine state gauges.
func (m *Metrics) RegisterEngine(e *engine.Engine) {
	m.reg.MustRegister(&engineCollector{
		eng: e,
		breaker: prometheus.NewDesc(ns+"_breaker_state", "Provider circuit breaker state: 0 CLOSED, 1 DEGRADED, 2 OPEN, 3 HALF_OPEN.",
			[]string{"provider"}, nil),
		failures: prometheus.NewDesc(ns+"_breaker_failures", "Provider circuit breaker failure count.", []string{"provider"}, nil),
		cooling:  prometheus.NewDesc(ns+"_cooling_connections", "Connections in a cooldown now.", nil, nil),
		terminal: prometheus.NewDesc(ns+"_unavailable_connections", "Connections in a terminal state (banned, expired, credits_exhausted).", nil, nil),
		lockouts: prometheus.NewDesc(ns+"_active_lockouts", "Active model lockouts by reason.", []string{"reason"}, nil),
	})
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.breaker
	ch <- c.failures
	ch <- c.cooling
	ch <- c.terminal
	ch <- c.lockouts
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.eng.Health()
	for p, ph := range h.Providers {
		ch <- prometheus.MustNewConstMetric(c.breaker, prometheus.GaugeValue, breakerStateValue[ph.State], p)
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.GaugeValue, float64(ph.FailureCount), p)
	}
	ch <- prometheus.MustNewConstMetric(c.cooling, prometheus.GaugeValue, float64(h.CoolingConnections))
	ch <- prometheus.MustNewConstMetric(c.terminal, prometheus.GaugeValue, float64(h.UnavailableConnections))
	for r, n := range h.LockoutsByReason {
		ch <- prometheus.MustNewConstMetric(c.lockouts, prometheus.GaugeValue, float64(n), r)
	}
}

// admissionCollector reads the admission manager's per-connection state at
// scrape time: queue depth, running requests, waits and rejections.
type admissionCollector struct {
	snap       func() []admission.ConnStats
	queued     *prometheus.Desc
	running    *prometheus.Desc
	waits      *prometheus.Desc
	rejections *prometheus.Desc
	failOpen   *prometheus.Desc
}

// RegisterAdmission adds the admission gauges, read from snap at scrape
// time.
func (m *Metrics) RegisterAdmission(snap func() []admission.ConnStats) {
	l := []string{"provider", "connection"}
	m.reg.MustRegister(&admissionCollector{
		snap:       snap,
		queued:     prometheus.NewDesc(ns+"_admission_queued", "Requests waiting in a connection's queue or gates.", l, nil),
		running:    prometheus.NewDesc(ns+"_admission_running", "Admitted requests in flight on a connection.", l, nil),
		waits:      prometheus.NewDesc(ns+"_admission_waits_total", "Admitted requests that had to wait.", l, nil),
		rejections: prometheus.NewDesc(ns+"_admission_refusals_total", "Requests refused by a connection's admission, any code.", l, nil),
		failOpen:   prometheus.NewDesc(ns+"_quota_share_fail_open_total", "Requests that proceeded without a quota-share slot.", l, nil),
	})
}

func (c *admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.queued
	ch <- c.running
	ch <- c.waits
	ch <- c.rejections
	ch <- c.failOpen
}

func (c *admissionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.snap() {
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(s.Queued), s.Provider, s.Connection)
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(s.Running), s.Provider, s.Connection)
		ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(s.Waits), s.Provider, s.Connection)
		ch <- prometheus.MustNewConstMetric(c.rejections, prometheus.CounterValue, float64(s.Rejections), s.Provider, s.Connection)
		ch <- prometheus.MustNewConstMetric(c.failOpen, prometheus.CounterValue, float64(s.QuotaShareFailOpen), s.Provider, s.Connection)
	}
}

// pluginCollector reads the plugin host's per-plugin call statistics.
type pluginCollector struct {
	list   func() []plugins.Status
	calls  *prometheus.Desc
	errors *prometheus.Desc
	p99    *prometheus.Desc
}

// RegisterPlugins adds the plugin call statistics, read from list at
// scrape time.
func (m *Metrics) RegisterPlugins(list func() []plugins.Status) {
	l := []string{"plugin"}
	m.reg.MustRegister(&pluginCollector{
		list:   list,
		calls:  prometheus.NewDesc(ns+"_plugin_calls_total", "Plugin hook calls.", l, nil),
		errors: prometheus.NewDesc(ns+"_plugin_errors_total", "Plugin hook calls that trapped, timed out or answered garbage.", l, nil),
		p99:    prometheus.NewDesc(ns+"_plugin_call_p99_seconds", "99th percentile of a plugin's recent hook calls.", l, nil),
	})
}

func (c *pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.calls
	ch <- c.errors
	ch <- c.p99
}

func (c *pluginCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.list() {
		ch <- prometheus.MustNewConstMetric(c.calls, prometheus.CounterValue, float64(p.Calls), p.Name)
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(p.Errors), p.Name)
		ch <- prometheus.MustNewConstMetric(c.p99, prometheus.GaugeValue, float64(p.P99Micros)/1e6, p.Name)
	}
}
