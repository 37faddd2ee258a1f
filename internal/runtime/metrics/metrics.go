// Package metrics exports Breakwater's Prometheus metrics: requests and
// attempts by provider, connection, model and outcome reason, latency and
// gateway-overhead histograms, resilience state (breakers, cooling
// connections, lockouts), admission, streaming and policy decisions.
//
// Labels are bounded: provider, connection and model come from the
// configuration (a model the configuration does not know is reported as
// "other"), reasons and codes from fixed vocabularies. Client keys and
// other secrets are never labels.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

const ns = "breakwater"

// Metrics holds every collector on its own registry (no global state). It
// is goroutine-safe.
type Metrics struct {
	reg *prometheus.Registry

	requests         *prometheus.CounterVec
	internalRequests *prometheus.CounterVec
	attempts         *prometheus.CounterVec
	attemptsPerReq   prometheus.Histogram
	upstreamLatency  *prometheus.HistogramVec
	overhead         prometheus.Histogram
	breakerTrans     *prometheus.CounterVec
	cooldowns        *prometheus.CounterVec
	terminal         *prometheus.CounterVec
	lockoutsArmed    *prometheus.CounterVec
	exclusions       *prometheus.CounterVec
	admissionRejects *prometheus.CounterVec
	admissionWait    prometheus.Histogram
	streamEvents     *prometheus.CounterVec
	policyDecisions  *prometheus.CounterVec
	policyLatency    prometheus.Histogram
	streamTTFB       prometheus.Histogram
	emergency        *prometheus.CounterVec

	// The request path's children, resolved once per label values.
	requestChildren *children[requestKey, requestChildren]
	attemptChildren *children[attemptKey, prometheus.Counter]
	streamChildren  *children[streamKey, prometheus.Counter]
}

// New builds the collectors and registers them, with the Go runtime and
// process collectors, on a fresh registry.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
		Help: "Client requests by endpoint, final provider, model, HTTP status class and error code."},
		[]string{"endpoint", "provider", "model", "status", "code"})
	m.internalRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "internal_requests_total",
		Help: "Calls the orchestrations (fusion panels and judges, pipeline steps, context-relay summaries) make through the request loop, by final provider, model, HTTP status class and error code; they are not client requests and are not in requests_total."},
		[]string{"provider", "model", "status", "code"})
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "attempts_total",
		Help: "Upstream attempts by provider, connection, model and classified outcome reason (\"success\" for 2xx)."},
		[]string{"provider", "connection", "model", "reason"})
	m.attemptsPerReq = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "attempts_per_request",
		Help: "Upstream attempts made per client request.", Buckets: []float64{0, 1, 2, 3, 4, 5, 7, 10}})
	m.upstreamLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "upstream_latency_seconds",
		Help: "Time spent waiting on upstream calls per request, by final provider.", Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14)},
		[]string{"provider"})
	m.overhead = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "gateway_overhead_seconds",
		Help:    "Gateway overhead per request: total time minus time waiting on upstream calls.",
		Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1}})
	m.breakerTrans = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "breaker_transitions_total",
		Help: "Provider circuit breaker state transitions."}, []string{"provider", "from", "to"})
	m.cooldowns = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "connection_cooldowns_total",
		Help: "Connection cooldowns armed or extended, by reason."}, []string{"provider", "connection", "reason"})
	m.terminal = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "connection_terminal_total",
		Help: "Connections that entered a terminal state."}, []string{"provider", "connection", "state"})
	m.lockoutsArmed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "model_lockouts_total",
		Help: "Model lockouts armed or extended, by reason."}, []string{"provider", "reason"})
	m.exclusions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "exclusions_total",
		Help: "Targets skipped during routing, by exclusion reason."}, []string{"reason"})
	m.admissionRejects = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "admission_rejections_total",
		Help: "Requests refused by local admission control, by code."}, []string{"provider", "connection", "code"})
	m.admissionWait = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "admission_wait_seconds",
		Help: "Time requests waited in local queues and gates.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)})
	m.streamEvents = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "stream_events_total",
		Help: "Stream lifecycle events: commit, failover (before commit), abort by reason, client_gone."}, []string{"event", "reason"})
	m.policyDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "policy_decisions_total",
		Help: "Failure classifications by deciding source (operator, plugin, builtin, default) and reason."}, []string{"source", "reason"})
	m.policyLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "policy_decision_seconds",
		Help: "Time to restate and classify one upstream failure.", Buckets: prometheus.ExponentialBuckets(0.000005, 2.5, 10)})
	m.streamTTFB = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "stream_ttfb_seconds",
		Help: "Time from a streamed request's arrival to its first byte sent to the client.", Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14)})
	m.emergency = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "emergency_fallback_total",
		Help: "Requests the emergency fallback dispatched because no target could serve them, by outcome (served, failed)."}, []string{"outcome"})
	m.reg.MustRegister(m.requests, m.internalRequests, m.attempts, m.attemptsPerReq, m.upstreamLatency, m.overhead, m.breakerTrans,
		m.cooldowns, m.terminal, m.lockoutsArmed, m.exclusions, m.admissionRejects, m.admissionWait, m.streamEvents,
		m.policyDecisions, m.policyLatency, m.streamTTFB, m.emergency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.cacheChildren()
	return m
}

// Registry returns the registry, to register state collectors on.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Request records one finished client request.
func (m *Metrics) Request(endpoint, provider, model string, status int, code string, attempts int, total, upstream time.Duration) {
	c := m.requestChildren.get(requestKey{endpoint, provider, model, statusClass(status), code})
	c.count.Inc()
	m.attemptsPerReq.Observe(float64(attempts))
	if provider != "" && upstream > 0 {
		c.latency.Observe(upstream.Seconds())
	}
	if oh := total - upstream; oh >= 0 {
		m.overhead.Observe(oh.Seconds())
	}
}

// EmergencyFallback records one dispatch of the emergency fallback
// (docs/resilience.md §14) and its outcome: "served" or "failed".
func (m *Metrics) EmergencyFallback(outcome string) { m.emergency.WithLabelValues(outcome).Inc() }

// StreamTTFB records the time from a streamed request's arrival to the
// commit of its stream, when its first bytes go to the client.
func (m *Metrics) StreamTTFB(d time.Duration) { m.streamTTFB.Observe(d.Seconds()) }

// InternalRequest records one finished internal call of an orchestration.
func (m *Metrics) InternalRequest(provider, model string, status int, code string) {
	m.internalRequests.WithLabelValues(provider, model, statusClass(status), code).Inc()
}

// Attempt records one upstream attempt's outcome reason ("success" for a
// 2xx).
func (m *Metrics) Attempt(provider, connection, model, reason string) {
	m.attemptChildren.get(attemptKey{provider, connection, model, reason}).Inc()
}

// AdmissionRejected records a local admission refusal.
func (m *Metrics) AdmissionRejected(provider, connection, code string) {
	m.admissionRejects.WithLabelValues(provider, connection, code).Inc()
}

// AdmissionWait records time spent queued for admission.
func (m *Metrics) AdmissionWait(d time.Duration) { m.admissionWait.Observe(d.Seconds()) }

// Stream records a stream lifecycle event ("commit", "failover", "abort",
// "client_gone") with its reason (an empty answer is "empty_response").
func (m *Metrics) Stream(event, reason string) { m.streamChildren.get(streamKey{event, reason}).Inc() }

// PolicyDecision records one failure classification and its latency.
func (m *Metrics) PolicyDecision(source, reason string, d time.Duration) {
	m.policyDecisions.WithLabelValues(source, reason).Inc()
	m.policyLatency.Observe(d.Seconds())
}

// EngineObserver returns the engine hooks that feed the resilience
// counters.
func (m *Metrics) EngineObserver() engine.Observer {
	return engine.Observer{
		OnBreakerTransition: func(provider, from, to string) { m.breakerTrans.WithLabelValues(provider, from, to).Inc() },
		OnCooldown: func(provider, connection, reason string, _ time.Duration) {
			m.cooldowns.WithLabelValues(provider, connection, reason).Inc()
		},
		OnTerminal: func(provider, connection, state string) {
			m.terminal.WithLabelValues(provider, connection, state).Inc()
		},
		OnLockout: func(provider, _, _, reason string, _ time.Duration) {
			m.lockoutsArmed.WithLabelValues(provider, reason).Inc()
		},
		OnExclusion: func(reason string) { m.exclusions.WithLabelValues(reason).Inc() },
	}
}

func statusClass(status int) string {
	switch {
	case status >= 500:
		return "5xx"
	case status >= 400:
		return "4xx"
	case status >= 300:
		return "3xx"
	case status >= 200:
		return "2xx"
	default:
		return "other"
	}
}
