// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/waitmetrics"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// The metrics the connector emits, turned around from the join: per route and line, the time
// other requests waited while it held their thread; per route, where its requests' time went.
// These names and attributes are a contract, like the span fields (docs/spanprofiles.md);
// internal/waitmetrics holds the series and says what each one is.
const (
	MetricWaitInflicted = waitmetrics.MetricWaitInflicted
	MetricWaitDelayed   = waitmetrics.MetricWaitDelayed
	MetricSpanTime      = waitmetrics.MetricSpanTime
	MetricSpanHeldShare = waitmetrics.MetricSpanHeldShare

	MetricAttrService      = waitmetrics.MetricAttrService
	MetricAttrRoute        = waitmetrics.MetricAttrRoute
	MetricAttrFunction     = waitmetrics.MetricAttrFunction
	MetricAttrKind         = waitmetrics.MetricAttrKind
	MetricAttrDelayedRoute = waitmetrics.MetricAttrDelayedRoute
	MetricAttrCause        = waitmetrics.MetricAttrCause
)

// waitMetrics observes each enriched request from its join into the metrics' series.
type waitMetrics struct {
	*waitmetrics.Metrics
}

func newWaitMetrics(cfg MetricsConfig, start pcommon.Timestamp, fold waitmetrics.FoldCounter) *waitMetrics {
	limits := waitmetrics.Limits{MaxServices: cfg.MaxServices, MaxRoutes: cfg.MaxRoutes, MaxFunctions: cfg.MaxFunctions, MaxSeries: cfg.MaxSeries}
	return &waitMetrics{waitmetrics.New(limits, start, fold)}
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
	for _, k := range []string{profilestore.AttrHTTPRoute, AttrRoute} {
		if v, ok := s.Attributes().Get(k); ok && v.Type() == pcommon.ValueTypeStr && v.Str() != "" {
			return profiledict.Truncate(v.Str())
		}
	}
	return profiledict.Truncate(s.Name())
}

// observe adds one enriched request: the waits its holders inflicted on it, its time by cause
// and the share other requests held.
func (m *waitMetrics) observe(service string, s ptrace.Span, j *profilestore.Joined, nameOf func(pcommon.TraceID) string) {
	if !isRequest(s) || (!j.CPUKnown() && !j.OffKnown()) {
		return
	}
	svc := m.Service(service)
	route := m.Route(svc, routeOf(s))
	ex := waitmetrics.Exemplar{Trace: s.TraceID(), Span: s.SpanID(), At: s.EndTimestamp()}
	m.observeWaits(svc, route, j, ex, nameOf)
	m.observeCauses(svc, route, j)
	dur := int64(s.EndTimestamp()) - int64(s.StartTimestamp())
	if dur > 0 && j.CPUKnown() && j.OffKnown() == j.HasOff {
		ex.Value = min(float64(j.CPUOther+j.OffOther)/float64(dur), 1)
		m.AddShare(svc, route, ex)
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
func (m *waitMetrics) observeWaits(svc, delayedRoute string, j *profilestore.Joined, ex waitmetrics.Exemplar, nameOf func(pcommon.TraceID) string) {
	type routeHold struct {
		byKind [2]int64 // on CPU, blocked
		frames map[string]int64
	}
	var byRoute map[string]*routeHold
	for id, h := range j.Others {
		name := holderName(h, id, nameOf)
		r := byRoute[name]
		if r == nil {
			if byRoute == nil {
				byRoute = map[string]*routeHold{}
			}
			r = &routeHold{frames: make(map[string]int64, len(h.Frames))}
			byRoute[name] = r
		}
		for f, ns := range h.Frames {
			if ns <= 0 {
				continue
			}
			r.frames[f.Frame] += ns
			if f.Blocked {
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
		route := m.Route(svc, name)
		for i, kind := range [2]string{waitmetrics.KindCPUHeld, waitmetrics.KindBlockedHeld} {
			if r.byKind[i] > 0 {
				m.AddWait(svc, route, line[0].name, kind, delayedRoute, r.byKind[i], ex)
			}
		}
	}
}

func (m *waitMetrics) observeCauses(svc, route string, j *profilestore.Joined) {
	add := func(cause string, ns int64) { m.AddCause(svc, route, cause, ns) }
	// Only what the samples support, as on the span: a figure they do not is left out.
	if j.CPUKnown() {
		add(waitmetrics.CauseOwnCPU, j.CPUTrace)
		add(waitmetrics.CauseOtherRequestsCPU, j.CPUOther)
		add(waitmetrics.CauseNoSpanCPU, j.CPUNone)
	}
	if j.OffKnown() {
		add(waitmetrics.CauseBlocked, j.OffTrace)
		add(waitmetrics.CauseOtherRequestsBlocked, j.OffOther)
		add(waitmetrics.CauseIdle, j.OffNone)
		add(waitmetrics.CauseCPUStarved, j.Runnable)
	}
}
