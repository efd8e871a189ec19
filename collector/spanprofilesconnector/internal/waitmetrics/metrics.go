// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

// Package waitmetrics holds the series of the span_profiles connector's metrics (who made whom
// wait, each route's time by cause, the share others held): the values each attribute may take
// (bounded, the rest folded into `other` and counted), the heavy hitters that elect each holder
// route's lines, and the cumulative points sent at each flush. The connector observes each
// enriched request from its join and adds what it found here.
package waitmetrics // import "github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/waitmetrics"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// The metrics the connector emits, turned around from the join: per route and line, the time
// other requests waited while it held their thread; per route, where its requests' time went.
// These names and attributes are a contract, like the span fields (docs/spanprofiles.md); the
// connector's package exports them under the same names.
const (
	// Counter, ms: how long requests of a holder made other requests wait on the same thread.
	MetricWaitInflicted = "thread_ctx.wait.inflicted"
	// Counter: the requests a holder delayed (each request once per series).
	MetricWaitDelayed = "thread_ctx.wait.delayed"
	// Counter, ms: each route's time by cause.
	MetricSpanTime = "thread_ctx.span.time"
	// Histogram, 0-1: the share of each request's time that other requests held its thread.
	MetricSpanHeldShare = "thread_ctx.span.held_share"

	// The holder's (and the delayed request's: they share a thread, so a process) service.
	MetricAttrService = "service.name"
	// The holder's route (its http.route, else its span name); on span.* the request's own.
	MetricAttrRoute = "http.route"
	// The holder's top frame while it held the thread: "function (file:line)".
	MetricAttrFunction = "code.function"
	// `cpu` (the holder ran) or `blocked` (the holder was off CPU, asleep, inside its span).
	MetricAttrKind = "kind"
	// The route of the request that waited.
	MetricAttrDelayedRoute = "thread_ctx.delayed_route"
	// One of the causes below.
	MetricAttrCause = "cause"
)

// The causes of thread_ctx.span.time: what the request's thread did while it was open.
const (
	CauseOwnCPU               = "own_cpu"                // its own trace ran (cpu.trace_ms)
	CauseOtherRequestsCPU     = "other_requests_cpu"     // other requests ran (cpu.other_traces_ms)
	CauseOtherRequestsBlocked = "other_requests_blocked" // other requests blocked it (off_cpu.other_traces_ms)
	CauseNoSpanCPU            = "no_span_cpu"            // GC, the runtime, the loop (cpu.no_span_ms)
	CauseBlocked              = "blocked"                // it blocked itself (off_cpu.trace_ms)
	CauseCPUStarved           = "cpu_starved"            // runnable, waiting for a CPU (off_cpu.runnable_ms)
	CauseIdle                 = "idle"                   // the loop waited for I/O or timers (off_cpu.no_span_ms)
)

// The kinds of thread_ctx.wait.*: the holder ran, or it blocked inside its span.
const (
	KindCPUHeld     = "cpu"
	KindBlockedHeld = "blocked"
)

// Other is what a folded attribute says.
const Other = "other"

// Limits bound the values of each attribute and the series of each metric (the connector's
// metrics::max_* settings).
type Limits struct {
	MaxServices, MaxRoutes, MaxFunctions, MaxSeries int
}

// heldShareBounds are the held_share histogram's bucket bounds: fine where an alert is set
// (a request held for more than half its time), coarse below.
var heldShareBounds = []float64{0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1}

// waitKey is one thread_ctx.wait.* series.
type waitKey struct {
	service, route, function, kind, delayedRoute string
}

// causeKey is one thread_ctx.span.time series.
type causeKey struct {
	service, route, cause string
}

// routeKey is one thread_ctx.span.held_share series.
type routeKey struct {
	service, route string
}

// Exemplar is the request a series last saw (the one that waited, for wait.*; the request
// itself, for span.held_share), so that a dashboard opens its trace.
type Exemplar struct {
	Trace pcommon.TraceID
	Span  pcommon.SpanID
	At    pcommon.Timestamp
	Value float64
}

type waitSeries struct {
	// When the series began (the start of the interval its line was elected in).
	start   pcommon.Timestamp
	ms      float64
	delayed int64
	ex      Exemplar
}

type shareSeries struct {
	count  uint64
	sum    float64
	counts []uint64
	// The most held request since the last flush.
	ex Exemplar
}

// metricNames bounds the attribute values: services and each service's routes, first come (a route's
// lines are elected by weight: hitters.go).
type metricNames struct {
	cfg      Limits
	services map[string]map[string]struct{}
}

// FoldCounter counts values folded into `other`, by the attribute that was folded.
type FoldCounter func(attribute string)

func (n *metricNames) service(s string, fold FoldCounter) string {
	if _, ok := n.services[s]; ok {
		return s
	}
	if len(n.services) >= n.cfg.MaxServices {
		if _, ok := n.services[Other]; !ok {
			n.services[Other] = map[string]struct{}{}
		}
		fold(MetricAttrService)
		return Other
	}
	n.services[s] = map[string]struct{}{}
	return s
}

// route returns the route as a series names it; svc must be what service returned.
func (n *metricNames) route(svc, r string, fold FoldCounter) string {
	routes := n.services[svc]
	if _, ok := routes[r]; ok {
		return r
	}
	if len(routes) >= n.cfg.MaxRoutes {
		if _, ok := routes[Other]; !ok {
			routes[Other] = struct{}{}
		}
		fold(MetricAttrRoute)
		return Other
	}
	routes[r] = struct{}{}
	return r
}

// Metrics accumulates the connector's metrics over its life (cumulative series), bounded by
// Limits.
type Metrics struct {
	cfg Limits
	// The Collector's service.instance.id, on every resource: each Collector's cumulative
	// series are its own (the connector's metrics_instance.go).
	instance string
	start    pcommon.Timestamp
	names    metricNames
	// The cumulative wait series sent, by elected line (hitters.go).
	inflicted map[waitKey]*waitSeries
	// The waits of the current flush interval by their real line, and when it began.
	interval      map[waitKey]*waitSeries
	intervalStart pcommon.Timestamp
	// Each holder route's heavy hitters.
	hitters  map[routeKey]*heavyHitters
	spanTime map[causeKey]float64
	share    map[routeKey]*shareSeries
	fold     FoldCounter
}

// New returns empty metrics whose series begin at start; fold counts each value folded.
func New(cfg Limits, start pcommon.Timestamp, fold FoldCounter) *Metrics {
	return &Metrics{
		cfg:           cfg,
		start:         start,
		names:         metricNames{cfg: cfg, services: map[string]map[string]struct{}{}},
		inflicted:     map[waitKey]*waitSeries{},
		interval:      map[waitKey]*waitSeries{},
		hitters:       map[routeKey]*heavyHitters{},
		intervalStart: start,
		spanTime:      map[causeKey]float64{},
		share:         map[routeKey]*shareSeries{},
		fold:          fold,
	}
}

// SetInstance names the Collector on every resource (service.instance.id): each Collector's
// cumulative series are its own.
func (m *Metrics) SetInstance(instance string) {
	m.instance = instance
}

// Service returns the service as series name it: itself, or Other past MaxServices.
func (m *Metrics) Service(s string) string {
	return m.names.service(s, m.fold)
}

// Route returns a route of svc (what Service returned) as series name it: itself, or Other past
// MaxRoutes.
func (m *Metrics) Route(svc, r string) string {
	return m.names.route(svc, r, m.fold)
}

// AddWait adds ns that a request of delayedRoute waited while a request of svc's route held
// its thread in function, of kind KindCPUHeld or KindBlockedHeld.
func (m *Metrics) AddWait(svc, route, function, kind, delayedRoute string, ns int64, ex Exemplar) {
	m.addWait(waitKey{svc, route, function, kind, delayedRoute}, ns, ex)
}

// addWait adds ns of one delayed request's wait to the interval's series k; the request counts
// once in it (a route folded into `other` with another may bring it twice: a series counts each
// request once per holder route).
func (m *Metrics) addWait(k waitKey, ns int64, ex Exemplar) {
	ws := m.interval[k]
	if ws == nil {
		if len(m.interval) >= m.cfg.MaxSeries {
			// A flood of lines within one interval: past max_series, new ones are `other` of
			// their route at once where that series exists, else `other` in all but kind.
			m.fold("series")
			k.function = Other
			if ws = m.interval[k]; ws == nil {
				k = waitKey{Other, Other, Other, k.kind, Other}
				ws = m.interval[k]
			}
		}
		if ws == nil {
			ws = &waitSeries{}
			m.interval[k] = ws
		}
	}
	ms := float64(ns) / 1e6
	ws.ms += ms
	ws.delayed++
	ws.ex = ex
	ws.ex.Value = ms
}

// AddCause adds ns of a request of svc's route to its time by cause (thread_ctx.span.time).
func (m *Metrics) AddCause(svc, route, cause string, ns int64) {
	k := causeKey{svc, route, cause}
	if _, ok := m.spanTime[k]; !ok && len(m.spanTime) >= m.cfg.MaxSeries {
		m.fold("series")
		k = causeKey{Other, Other, cause}
	}
	m.spanTime[k] += float64(ns) / 1e6
}

// AddShare adds one request of svc's route to thread_ctx.span.held_share: ex.Value is the share
// of its time other requests held its thread.
func (m *Metrics) AddShare(svc, route string, ex Exemplar) {
	m.observeShare(routeKey{svc, route}, ex)
}

func (m *Metrics) observeShare(k routeKey, ex Exemplar) {
	ss := m.share[k]
	if ss == nil {
		if len(m.share) >= m.cfg.MaxSeries {
			m.fold("series")
			k = routeKey{Other, Other}
			ss = m.share[k]
		}
		if ss == nil {
			ss = &shareSeries{counts: make([]uint64, len(heldShareBounds)+1)}
			m.share[k] = ss
		}
	}
	i := 0
	for i < len(heldShareBounds) && ex.Value > heldShareBounds[i] {
		i++
	}
	ss.counts[i]++
	ss.count++
	ss.sum += ex.Value
	if ss.ex.Trace.IsEmpty() || ex.Value >= ss.ex.Value {
		ss.ex = ex
	}
}

// Series is how many series the metrics hold, all metrics together.
func (m *Metrics) Series() int {
	return 2*len(m.inflicted) + len(m.spanTime) + len(m.share)
}
