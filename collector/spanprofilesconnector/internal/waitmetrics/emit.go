// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package waitmetrics

import (
	"cmp"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/metadata"
)

// scope names the scope of the metrics the connector emits: its import path, as mdatagen's
// ScopeName is for every contrib component.
var scope = metadata.ScopeName

// attrServiceInstanceID names the Collector on each resource (SetInstance).
const attrServiceInstanceID = "service.instance.id"

// serviceMetrics is one service's metrics in a batch being built.
type serviceMetrics struct {
	inflicted, delayed, spanTime pmetric.NumberDataPointSlice
	share                        pmetric.HistogramDataPointSlice
}

// Emit returns every series as cumulative points at now (one resource per service, its
// service.name also on the resource, where Prometheus makes it the `job`, and the Collector's
// service.instance.id, its `instance`), each exemplar once.
func (m *Metrics) Emit(now pcommon.Timestamp) pmetric.Metrics {
	m.settleInterval(now)
	md := pmetric.NewMetrics()
	bySvc := map[string]*serviceMetrics{}
	of := func(svc string) *serviceMetrics {
		if sm := bySvc[svc]; sm != nil {
			return sm
		}
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr(MetricAttrService, svc)
		if m.instance != "" {
			rm.Resource().Attributes().PutStr(attrServiceInstanceID, m.instance)
		}
		ms := rm.ScopeMetrics().AppendEmpty()
		ms.Scope().SetName(scope)
		sum := func(name, desc, unit string) pmetric.NumberDataPointSlice {
			mt := ms.Metrics().AppendEmpty()
			mt.SetName(name)
			mt.SetDescription(desc)
			mt.SetUnit(unit)
			s := mt.SetEmptySum()
			s.SetIsMonotonic(true)
			s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			return s.DataPoints()
		}
		sm := &serviceMetrics{
			inflicted: sum(MetricWaitInflicted, "How long requests of a route made other requests wait on the same thread, by the route's top frame and whether it ran or blocked.", "ms"),
			delayed:   sum(MetricWaitDelayed, "The requests a route's requests made wait on the same thread.", "{request}"),
			spanTime:  sum(MetricSpanTime, "Requests' time by cause: what their thread did while they were open.", "ms"),
		}
		mt := ms.Metrics().AppendEmpty()
		mt.SetName(MetricSpanHeldShare)
		mt.SetDescription("The share of each request's time that other requests held its thread.")
		mt.SetUnit("1")
		h := mt.SetEmptyHistogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		sm.share = h.DataPoints()
		bySvc[svc] = sm
		return sm
	}
	point := func(dps pmetric.NumberDataPointSlice, start pcommon.Timestamp, attrs ...string) pmetric.NumberDataPoint {
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(now)
		a := dp.Attributes()
		for i := 0; i+1 < len(attrs); i += 2 {
			a.PutStr(attrs[i], attrs[i+1])
		}
		return dp
	}
	for _, k := range sortedKeys(m.inflicted, cmpWaitKey) {
		ws := m.inflicted[k]
		sm := of(k.service)
		attrs := []string{MetricAttrService, k.service, MetricAttrRoute, k.route, MetricAttrFunction, k.function, MetricAttrKind, k.kind, MetricAttrDelayedRoute, k.delayedRoute}
		dp := point(sm.inflicted, ws.start, attrs...)
		dp.SetDoubleValue(ws.ms)
		putExemplar(dp.Exemplars(), ws.ex, now, true)
		dd := point(sm.delayed, ws.start, attrs...)
		dd.SetIntValue(ws.delayed)
		putExemplar(dd.Exemplars(), ws.ex, now, false)
		ws.ex = Exemplar{}
	}
	for _, k := range sortedKeys(m.spanTime, func(a, b causeKey) int {
		return cmp.Or(cmp.Compare(a.service, b.service), cmp.Compare(a.route, b.route), cmp.Compare(a.cause, b.cause))
	}) {
		dp := point(of(k.service).spanTime, m.start, MetricAttrService, k.service, MetricAttrRoute, k.route, MetricAttrCause, k.cause)
		dp.SetDoubleValue(m.spanTime[k])
	}
	for _, k := range sortedKeys(m.share, func(a, b routeKey) int {
		return cmp.Or(cmp.Compare(a.service, b.service), cmp.Compare(a.route, b.route))
	}) {
		ss := m.share[k]
		dp := of(k.service).share.AppendEmpty()
		dp.SetStartTimestamp(m.start)
		dp.SetTimestamp(now)
		dp.Attributes().PutStr(MetricAttrService, k.service)
		dp.Attributes().PutStr(MetricAttrRoute, k.route)
		dp.SetCount(ss.count)
		dp.SetSum(ss.sum)
		dp.SetMin(0)
		dp.ExplicitBounds().FromRaw(heldShareBounds)
		dp.BucketCounts().FromRaw(ss.counts)
		if !ss.ex.Trace.IsEmpty() {
			e := dp.Exemplars().AppendEmpty()
			e.SetTimestamp(ss.ex.At)
			e.SetDoubleValue(ss.ex.Value)
			e.SetTraceID(ss.ex.Trace)
			e.SetSpanID(ss.ex.Span)
			ss.ex = Exemplar{}
		}
	}
	dropEmpty(md)
	return md
}

// dropEmpty removes the metrics a service has no point of (a service whose requests waited for
// none has no thread_ctx.wait.*): Prometheus refuses a metric without points and logs
// "empty data points. ... is dropped" at every flush.
func dropEmpty(md pmetric.Metrics) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for k := 0; k < sms.Len(); k++ {
			sms.At(k).Metrics().RemoveIf(func(mt pmetric.Metric) bool {
				if mt.Type() == pmetric.MetricTypeHistogram {
					return mt.Histogram().DataPoints().Len() == 0
				}
				return mt.Sum().DataPoints().Len() == 0
			})
		}
	}
}

// putExemplar adds ex (the last request a series delayed) to a point: its ms of wait, or a
// count of one request.
func putExemplar(es pmetric.ExemplarSlice, ex Exemplar, now pcommon.Timestamp, ms bool) {
	if ex.Trace.IsEmpty() {
		return
	}
	e := es.AppendEmpty()
	e.SetTimestamp(min(ex.At, now))
	if ms {
		e.SetDoubleValue(ex.Value)
	} else {
		e.SetIntValue(1)
	}
	e.SetTraceID(ex.Trace)
	e.SetSpanID(ex.Span)
}

func cmpWaitKey(a, b waitKey) int {
	return cmp.Or(cmp.Compare(a.service, b.service), cmp.Compare(a.route, b.route), cmp.Compare(a.function, b.function),
		cmp.Compare(a.kind, b.kind), cmp.Compare(a.delayedRoute, b.delayedRoute))
}

// sortedKeys returns m's keys in order: a batch lists its series the same way each time.
func sortedKeys[K comparable, V any](m map[K]V, c func(a, b K) int) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, c)
	return keys
}
