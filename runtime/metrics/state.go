package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/breakwater-dev/breakwater/engine"
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
