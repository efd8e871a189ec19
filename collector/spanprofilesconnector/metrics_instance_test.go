// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// Two Collectors (two nodes of a DaemonSet) count the same service: each one's series carry its
// own service.instance.id (Prometheus's `instance`), so their cumulative sums never meet.
func TestEachCollectorsSeriesAreItsOwn(t *testing.T) {
	var resources []pcommon.Map
	for _, id := range []string{"collector-node-a", "collector-node-b"} {
		res := pcommon.NewResource()
		res.Attributes().PutStr(profilestore.AttrServiceInstanceID, id)
		m := newWaitMetrics(defaultMetricsConfig(), 1, func(string) {})
		m.SetInstance(collectorInstance(res))
		holdBy(m, 1, map[string]float64{"hot (a.js:1)": 10})
		md := m.Emit(2)
		require.Equal(t, 1, md.ResourceMetrics().Len())
		resources = append(resources, md.ResourceMetrics().At(0).Resource().Attributes())
	}
	for i, want := range []string{"collector-node-a", "collector-node-b"} {
		got, _ := resources[i].Get(profilestore.AttrServiceInstanceID)
		assert.Equal(t, want, got.Str())
		svc, _ := resources[i].Get(MetricAttrService)
		assert.Equal(t, "gateway", svc.Str())
	}
	host, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, host, collectorInstance(pcommon.NewResource()), "without one, the node")
}

// A service with requests but no waits (nothing held them) sends thread_ctx.span.* only: no
// metric without points, which Prometheus would log and drop at every flush.
func TestNoMetricWithoutPoints(t *testing.T) {
	m := newWaitMetrics(defaultMetricsConfig(), 1, func(string) {})
	span := ptrace.NewSpan()
	span.SetKind(ptrace.SpanKindServer)
	span.SetStartTimestamp(1)
	span.SetEndTimestamp(1 + 10e6)
	m.observe("quiet", span, &profilestore.Joined{CPUTrace: 10e6, HasCPU: true, Seen: true}, func(pcommon.TraceID) string { return "" })
	md := m.Emit(2)
	require.Positive(t, md.DataPointCount())
	var names []string
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		names = append(names, ms.At(i).Name())
	}
	assert.Equal(t, []string{MetricSpanTime, MetricSpanHeldShare}, names)
}

// One truth: the span's held_by_routes (what `thread-ctx report --traces` sums) and the metric
// name the same line with the same ms. /search held /wait's thread 30 ms in rank and 20 ms in
// the comparator on rank's line, `(anonymous) (service.js:38)`: both say 50 ms in rank.
func TestTheMetricsAgreeWithTheSpan(t *testing.T) {
	h := newMetricsHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	rank := on{tid: mainTID, trace: 3, span: 3, route: "/search", stack: r.stack(js("rank", "/srv/app/service.js", 38))}
	comparator := on{tid: mainTID, trace: 3, span: 3, route: "/search", stack: r.stack(js("(anonymous)", "/srv/app/service.js", 38), js("rank", "/srv/app/service.js", 38))}
	w.cpuAt(rank, 110, 120, 130)
	w.cpuAt(comparator, 140, 150)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 200, name: "GET /wait", route: "/wait", server: true}))
	require.Equal(t, int64(1), h.spans(spanEnriched))
	h.flush()
	var span ptrace.Span
	for _, s := range h.received() {
		span = s
	}
	assert.Equal(t, []string{"/search 50.0ms in 1 requests: rank (service.js:38)"}, eventStrings(profileEvent(t, span), EventHeldByRoutes))
	inflicted := h.lastPoints(MetricWaitInflicted)
	require.Len(t, inflicted, 1)
	k := "service.name=shop,http.route=/search,code.function=rank (service.js:38),kind=cpu,thread_ctx.delayed_route=/wait"
	require.Contains(t, inflicted, k)
	assert.InDelta(t, 50.0, inflicted[k].DoubleValue(), 1e-9)
}
