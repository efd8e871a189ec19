// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The metrics the connector emits, turned around from the join: per route and line, the time
// other requests waited while it held their thread; per route, where its requests' time went.
// These names and attributes are a contract, like the span fields (docs/spanprofiles.md).
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
	causeOwnCPU               = "own_cpu"                // its own trace ran (cpu.trace_ms)
	causeOtherRequestsCPU     = "other_requests_cpu"     // other requests ran (cpu.other_traces_ms)
	causeOtherRequestsBlocked = "other_requests_blocked" // other requests blocked it (off_cpu.other_traces_ms)
	causeNoSpanCPU            = "no_span_cpu"            // GC, the runtime, the loop (cpu.no_span_ms)
	causeBlocked              = "blocked"                // it blocked itself (off_cpu.trace_ms)
	causeCPUStarved           = "cpu_starved"            // runnable, waiting for a CPU (off_cpu.runnable_ms)
	causeIdle                 = "idle"                   // the loop waited for I/O or timers (off_cpu.no_span_ms)
)

const (
	kindCPUHeld     = "cpu"
	kindBlockedHeld = "blocked"
)

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

// exemplar is the request a series last saw (the one that waited, for wait.*; the request
// itself, for span.held_share), so that a dashboard opens its trace.
type exemplar struct {
	trace pcommon.TraceID
	span  pcommon.SpanID
	at    pcommon.Timestamp
	value float64
}

type waitSeries struct {
	// When the series began (the start of the interval its line was elected in).
	start   pcommon.Timestamp
	ms      float64
	delayed int64
	ex      exemplar
}

type shareSeries struct {
	count  uint64
	sum    float64
	counts []uint64
	// The most held request since the last flush.
	ex exemplar
}

// metricNames bounds the attribute values: services and each service's routes, first come (a route's
// lines are elected by weight: metrics_hitters.go).
type metricNames struct {
	cfg      MetricsConfig
	services map[string]map[string]struct{}
}

// foldCounter counts values folded into `other`, by the attribute that was folded.
type foldCounter func(attribute string)

func (n *metricNames) service(s string, fold foldCounter) string {
	if _, ok := n.services[s]; ok {
		return s
	}
	if len(n.services) >= n.cfg.MaxServices {
		if _, ok := n.services[otherValue]; !ok {
			n.services[otherValue] = map[string]struct{}{}
		}
		fold(MetricAttrService)
		return otherValue
	}
	n.services[s] = map[string]struct{}{}
	return s
}

// route returns the route as a series names it; svc must be what service returned.
func (n *metricNames) route(svc, r string, fold foldCounter) string {
	routes := n.services[svc]
	if _, ok := routes[r]; ok {
		return r
	}
	if len(routes) >= n.cfg.MaxRoutes {
		if _, ok := routes[otherValue]; !ok {
			routes[otherValue] = struct{}{}
		}
		fold(MetricAttrRoute)
		return otherValue
	}
	routes[r] = struct{}{}
	return r
}

// waitMetrics accumulates the connector's metrics over its life (cumulative series), bounded
// by MetricsConfig.
type waitMetrics struct {
	cfg MetricsConfig
	// The Collector's service.instance.id, on every resource: each Collector's cumulative
	// series are its own (metrics_instance.go).
	instance string
	start    pcommon.Timestamp
	names    metricNames
	// The cumulative wait series sent, by elected line (metrics_hitters.go).
	inflicted map[waitKey]*waitSeries
	// The waits of the current flush interval by their real line, and when it began.
	interval      map[waitKey]*waitSeries
	intervalStart pcommon.Timestamp
	// Each holder route's heavy hitters.
	hitters  map[routeKey]*heavyHitters
	spanTime map[causeKey]float64
	share    map[routeKey]*shareSeries
	fold     foldCounter
}

func newWaitMetrics(cfg MetricsConfig, start pcommon.Timestamp, fold foldCounter) *waitMetrics {
	return &waitMetrics{
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

// isRequest says whether a span is one request of its service: a server or consumer span, or
// a root. Its children's time is inside its own, so only requests are counted.
func isRequest(s ptrace.Span) bool {
	k := s.Kind()
	return k == ptrace.SpanKindServer || k == ptrace.SpanKindConsumer || s.ParentSpanID().IsEmpty()
}

// routeOf is the route a request is counted under: its http.route, else the route the
// connector named it by (route.go: its samples', else its templated path), else its name.
func routeOf(s ptrace.Span) string {
	for _, k := range []string{attrHTTPRoute, AttrRoute} {
		if v, ok := s.Attributes().Get(k); ok && v.Type() == pcommon.ValueTypeStr && v.Str() != "" {
			return truncate(v.Str())
		}
	}
	return truncate(s.Name())
}

// observe adds one enriched request: the waits its holders inflicted on it, its time by cause
// and the share other requests held.
func (m *waitMetrics) observe(service string, s ptrace.Span, j *joined, nameOf func(pcommon.TraceID) string) {
	if !isRequest(s) || (!j.cpuKnown() && !j.offKnown()) {
		return
	}
	svc := m.names.service(service, m.fold)
	route := m.names.route(svc, routeOf(s), m.fold)
	ex := exemplar{trace: s.TraceID(), span: s.SpanID(), at: s.EndTimestamp()}
	m.observeWaits(svc, route, j, ex, nameOf)
	m.observeCauses(svc, route, j)
	dur := int64(s.EndTimestamp()) - int64(s.StartTimestamp())
	if dur > 0 && j.cpuKnown() && j.offKnown() == j.hasOff {
		ex.value = min(float64(j.cpuOther+j.offOther)/float64(dur), 1)
		m.observeShare(routeKey{svc, route}, ex)
	}
}

// observeWaits adds one delayed request's waits as its span tells them (held_by_routes, which
// `thread-ctx report --traces` sums): the time each holder route held its thread goes to that
// route's top line on this request, the line it held the thread in longest on CPU and blocked
// together, split by kind. So the metrics and the report agree per holder route and line. (The
// demo's /api/search spent 8.6 s of its 29 s in the sort comparator on the same line as
// rankSearchResults, `(anonymous) (service.js:38)`: split by every frame, the two views
// differed.) A route that ran in one line and blocked in another on the same request has its
// blocked time under the line it held the thread in longest, as its span says.
func (m *waitMetrics) observeWaits(svc, delayedRoute string, j *joined, ex exemplar, nameOf func(pcommon.TraceID) string) {
	type routeHold struct {
		byKind [2]int64 // on CPU, blocked
		frames map[string]int64
	}
	var byRoute map[string]*routeHold
	for id, h := range j.others {
		name := holderName(h, id, nameOf)
		r := byRoute[name]
		if r == nil {
			if byRoute == nil {
				byRoute = map[string]*routeHold{}
			}
			r = &routeHold{frames: make(map[string]int64, len(h.frames))}
			byRoute[name] = r
		}
		for f, ns := range h.frames {
			if ns <= 0 {
				continue
			}
			r.frames[f.frame] += ns
			if f.blocked {
				r.byKind[1] += ns
			} else {
				r.byKind[0] += ns
			}
		}
	}
	for name, r := range byRoute {
		line := top(r.frames, 1)
		if len(line) == 0 {
			continue
		}
		route := m.names.route(svc, name, m.fold)
		for i, kind := range [2]string{kindCPUHeld, kindBlockedHeld} {
			if r.byKind[i] > 0 {
				m.addWait(waitKey{svc, route, line[0].name, kind, delayedRoute}, r.byKind[i], ex)
			}
		}
	}
}

// addWait adds ns of one delayed request's wait to the interval's series k; the request counts
// once in it (a route folded into `other` with another may bring it twice: a series counts each
// request once per holder route).
func (m *waitMetrics) addWait(k waitKey, ns int64, ex exemplar) {
	ws := m.interval[k]
	if ws == nil {
		if len(m.interval) >= m.cfg.MaxSeries {
			// A flood of lines within one interval: past max_series, new ones are `other` of
			// their route at once where that series exists, else `other` in all but kind.
			m.fold("series")
			k.function = otherValue
			if ws = m.interval[k]; ws == nil {
				k = waitKey{otherValue, otherValue, otherValue, k.kind, otherValue}
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
	ws.ex.value = ms
}

func (m *waitMetrics) observeCauses(svc, route string, j *joined) {
	add := func(cause string, ns int64) {
		k := causeKey{svc, route, cause}
		if _, ok := m.spanTime[k]; !ok && len(m.spanTime) >= m.cfg.MaxSeries {
			m.fold("series")
			k = causeKey{otherValue, otherValue, cause}
		}
		m.spanTime[k] += float64(ns) / 1e6
	}
	// Only what the samples support, as on the span: a figure they do not is left out.
	if j.cpuKnown() {
		add(causeOwnCPU, j.cpuTrace)
		add(causeOtherRequestsCPU, j.cpuOther)
		add(causeNoSpanCPU, j.cpuNone)
	}
	if j.offKnown() {
		add(causeBlocked, j.offTrace)
		add(causeOtherRequestsBlocked, j.offOther)
		add(causeIdle, j.offNone)
		add(causeCPUStarved, j.runnable)
	}
}

func (m *waitMetrics) observeShare(k routeKey, ex exemplar) {
	ss := m.share[k]
	if ss == nil {
		if len(m.share) >= m.cfg.MaxSeries {
			m.fold("series")
			k = routeKey{otherValue, otherValue}
			ss = m.share[k]
		}
		if ss == nil {
			ss = &shareSeries{counts: make([]uint64, len(heldShareBounds)+1)}
			m.share[k] = ss
		}
	}
	i := 0
	for i < len(heldShareBounds) && ex.value > heldShareBounds[i] {
		i++
	}
	ss.counts[i]++
	ss.count++
	ss.sum += ex.value
	if ss.ex.trace.IsEmpty() || ex.value >= ss.ex.value {
		ss.ex = ex
	}
}

// series is how many series the metrics hold, all metrics together.
func (m *waitMetrics) series() int {
	return 2*len(m.inflicted) + len(m.spanTime) + len(m.share)
}
