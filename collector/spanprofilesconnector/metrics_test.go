// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/waitmetrics"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// Two requests interleaved on one thread while a /wait request waited: /hog ran, /search ran
// and then blocked. Each holder's wait is counted by its route, top frame and kind, exactly;
// the /wait request's time is split by cause; the share held is in the histogram.
func TestTwoHoldersInterleavedOnOneThread(t *testing.T) {
	h := newMetricsHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	hog := r.stack(js("hogCPU", "/srv/app/service.js", 12))
	rank := r.stack(js("rank", "/srv/app/service.js", 38))
	block := r.stack(native("futex_wait"), js("blockFor", "/srv/app/service.js", 55))
	mine := r.stack(js("respond", "/srv/app/service.js", 40))
	hogAt := on{tid: mainTID, trace: 2, span: 2, route: "/hog", stack: hog}
	searchAt := on{tid: mainTID, trace: 3, span: 3, route: "/search", stack: rank}
	// The /wait span: 100-200 ms.
	w.cpuAt(on{tid: mainTID, trace: 1, span: 1, route: "/wait", stack: mine}, 105)
	w.cpuAt(hogAt, 110, 130, 150)
	w.cpuAt(searchAt, 120, 140)
	w.blocked(on{tid: mainTID, trace: 3, span: 3, route: "/search", stack: block}, 160, 175)
	w.preempted(hogAt, 180, 190)
	w.blocked(on{tid: mainTID, stack: r.stack(native("epoll_wait"))}, 190, 198)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 200, name: "GET /wait", route: "/wait", server: true}))
	require.Equal(t, int64(1), h.spans(spanEnriched))
	h.flush()

	waitAttrs := func(route, fn, kind string) string {
		return fmt.Sprintf("service.name=shop,http.route=%s,code.function=%s,kind=%s,thread_ctx.delayed_route=/wait", route, fn, kind)
	}
	inflicted := h.lastPoints(MetricWaitInflicted)
	assert.Len(t, inflicted, 3)
	for k, want := range map[string]float64{
		waitAttrs("/hog", "hogCPU (service.js:12)", "cpu"):  30,
		waitAttrs("/search", "rank (service.js:38)", "cpu"): 20,
		// /search's top line on this request is rank (20 ms on CPU against 15 blocked in
		// blockFor): its blocked time goes there too, as its span's held_by_routes says.
		waitAttrs("/search", "rank (service.js:38)", "blocked"): 15,
	} {
		require.Contains(t, inflicted, k)
		assert.InDelta(t, want, inflicted[k].DoubleValue(), 1e-9, k)
		ex := inflicted[k].Exemplars()
		require.Equal(t, 1, ex.Len(), "the request it delayed opens its trace")
		assert.Equal(t, traceID(1), ex.At(0).TraceID())
	}
	delayed := h.lastPoints(MetricWaitDelayed)
	assert.Len(t, delayed, 3)
	for k, dp := range delayed {
		assert.Equal(t, int64(1), dp.IntValue(), k)
	}

	causes := h.lastPoints(MetricSpanTime)
	for cause, want := range map[string]float64{
		waitmetrics.CauseOwnCPU: 10, waitmetrics.CauseOtherRequestsCPU: 50, waitmetrics.CauseNoSpanCPU: 0, waitmetrics.CauseBlocked: 0,
		waitmetrics.CauseOtherRequestsBlocked: 15, waitmetrics.CauseIdle: 8, waitmetrics.CauseCPUStarved: 10,
	} {
		k := "service.name=shop,http.route=/wait,cause=" + cause
		require.Contains(t, causes, k)
		assert.InDelta(t, want, causes[k].DoubleValue(), 1e-9, cause)
	}
	assert.Len(t, causes, 7)

	var hist pmetric.HistogramDataPoint
	forEachMetric(h.msink.AllMetrics()[0], MetricSpanHeldShare, func(m pmetric.Metric) { hist = m.Histogram().DataPoints().At(0) })
	assert.Equal(t, uint64(1), hist.Count())
	assert.InDelta(t, 0.65, hist.Sum(), 1e-9)
	assert.Equal(t, uint64(1), hist.BucketCounts().At(8), "0.65 is in (0.6, 0.7], the ninth bucket")
	require.Equal(t, 1, hist.Exemplars().Len())
	assert.Equal(t, traceID(1), hist.Exemplars().At(0).TraceID())
	assert.Equal(t, spanID(1), hist.Exemplars().At(0).SpanID())

	// Cumulative: a second flush repeats the totals, without the exemplars already sent.
	h.flush()
	again := h.lastPoints(MetricWaitInflicted)
	assert.InDelta(t, 30.0, again[waitAttrs("/hog", "hogCPU (service.js:12)", "cpu")].DoubleValue(), 1e-9)
	assert.Zero(t, again[waitAttrs("/hog", "hogCPU (service.js:12)", "cpu")].Exemplars().Len())
}

// Only requests count: a child span's time is inside its request's; the holders' own
// requests count as requests too (here nobody held them).
func TestOnlyRequestsAreCounted(t *testing.T) {
	h := newMetricsHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	hog := on{tid: mainTID, trace: 2, span: 2, route: "/hog", stack: r.stack(js("hogCPU", "/srv/app/service.js", 12))}
	w.cpuEvery(hog, 110, 150)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID),
		spanSpec{trace: 1, span: 1, start: 100, end: 200, name: "GET /wait", route: "/wait", server: true},
		spanSpec{trace: 1, span: 7, start: 101, end: 199, name: "handler /wait"},
		spanSpec{trace: 2, span: 2, start: 109, end: 155, name: "GET /hog", route: "/hog", server: true},
	))
	require.Equal(t, int64(3), h.spans(spanEnriched))
	h.flush()
	inflicted := h.lastPoints(MetricWaitInflicted)
	require.Len(t, inflicted, 1)
	for _, dp := range inflicted {
		assert.InDelta(t, 50.0, dp.DoubleValue(), 1e-9, "the child span's wait is not counted again")
	}
	causes := h.lastPoints(MetricSpanTime)
	assert.InDelta(t, 50.0, causes["service.name=shop,http.route=/hog,cause=own_cpu"].DoubleValue(), 1e-9)
	assert.NotContains(t, causes, "service.name=shop,http.route=handler /wait,cause=own_cpu")
}

// Without off-CPU profiles the off-CPU causes are absent, not zero.
func TestCausesOnlyWhereMeasured(t *testing.T) {
	h := newMetricsHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	w.cpuAt(on{tid: mainTID, trace: 1, span: 1, stack: r.stack(js("f", "/a.js", 1))}, 150)
	// A request of the agent with no off-CPU profile: drop the one the helper made.
	w.r.pd.ResourceProfiles().At(0).ScopeProfiles().At(0).Profiles().RemoveIf(func(p pprofile.Profile) bool {
		typ, _ := profiledict.NewDictionary(r.dict).Str(p.SampleType().TypeStrindex())
		return typ == profilestore.SampleTypeOff
	})
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 200, name: "GET /x", route: "/x", server: true}))
	h.flush()
	causes := h.lastPoints(MetricSpanTime)
	assert.Len(t, causes, 3)
	assert.Contains(t, causes, "service.name=shop,http.route=/x,cause=own_cpu")
	assert.NotContains(t, causes, "service.name=shop,http.route=/x,cause=idle")
}

// Past a bound, values fold into `other` and each fold is counted: routes past max_routes,
// functions past max_functions, series past max_series; nothing is dropped.
func TestCardinalityFolds(t *testing.T) {
	h := newMetricsHarness(t, func(c *Config) {
		c.Metrics.MaxRoutes = 3
		c.Metrics.MaxFunctions = 1
	})
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 10_000)
	var specs []spanSpec
	// Five delayed requests /r0../r4, each 100 ms, each held 10 ms by /hog in a function of
	// its own.
	for i := 0; i < 5; i++ {
		start := float64(100 + 200*i)
		w.cpuAt(on{tid: mainTID, trace: byte(100 + i), span: byte(100 + i), route: "/hog", stack: r.stack(js(fmt.Sprintf("f%d", i), "/a.js", int64(i+1)))}, start+50)
		specs = append(specs, spanSpec{trace: byte(1 + i), span: byte(1 + i), start: start, end: start + 100, route: fmt.Sprintf("/r%d", i), server: true})
	}
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), specs...))
	require.Equal(t, int64(5), h.spans(spanEnriched))
	h.flush()
	inflicted := h.lastPoints(MetricWaitInflicted)
	var total float64
	var routes []string
	for k, dp := range inflicted {
		total += dp.DoubleValue()
		routes = append(routes, k)
	}
	assert.InDelta(t, 50.0, total, 1e-9, "folded, never dropped")
	// Routes: /r0 and /hog, /r1, then every later one is `other`; functions: the one seat goes
	// to the heaviest line, f0 (all weigh 10 ms: the first by name), the rest are `other`.
	assert.ElementsMatch(t, []string{
		"service.name=shop,http.route=/hog,code.function=f0 (a.js:1),kind=cpu,thread_ctx.delayed_route=/r0",
		"service.name=shop,http.route=/hog,code.function=other,kind=cpu,thread_ctx.delayed_route=/r1",
		"service.name=shop,http.route=/hog,code.function=other,kind=cpu,thread_ctx.delayed_route=other",
	}, routes)
	assert.Equal(t, int64(3), h.folds(MetricAttrRoute), "/r2, /r3, /r4")
	assert.Equal(t, int64(4), h.folds(MetricAttrFunction), "f1..f4")
	assert.InDelta(t, 30.0, inflicted["service.name=shop,http.route=/hog,code.function=other,kind=cpu,thread_ctx.delayed_route=other"].DoubleValue(), 1e-9)
	assert.Equal(t, int64(3), h.lastPoints(MetricWaitDelayed)["service.name=shop,http.route=/hog,code.function=other,kind=cpu,thread_ctx.delayed_route=other"].IntValue())
}

// The Collector hands each batch to every half that takes its input: the traces -> metrics
// half leaves it to the traces -> traces one, so a request is joined and counted once.
func TestEachBatchIsTakenOnce(t *testing.T) {
	h := newMetricsHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	w.cpuEvery(on{tid: mainTID, trace: 2, span: 2, route: "/hog", stack: r.stack(js("hogCPU", "/a.js", 1))}, 110, 150)
	h.sendProfiles(r)
	td := traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 200, name: "GET /wait", route: "/wait", server: true})
	copyForMetrics := ptrace.NewTraces()
	td.CopyTo(copyForMetrics)
	require.NoError(t, h.metrics.ConsumeTraces(context.Background(), copyForMetrics))
	h.sendTraces(td)
	assert.Equal(t, int64(1), h.spans(spanEnriched))
	assert.Equal(t, 1, h.sink.SpanCount())
	h.flush()
	for _, dp := range h.lastPoints(MetricWaitInflicted) {
		assert.InDelta(t, 50.0, dp.DoubleValue(), 1e-9)
	}
}

// A Collector that wants the metrics only (no traces pipeline after the connector): the
// metrics halves take spans and profiles themselves, and leave the batches they were handed
// as they were.
func TestMetricsOnly(t *testing.T) {
	cfg := createDefaultConfig()
	msink := &consumertest.MetricsSink{}
	set := connectortest.NewNopSettings(component.MustNewType(typeStr))
	set.ID = component.MustNewIDWithName(typeStr, t.Name())
	f := NewFactory()
	tm, err := f.CreateTracesToMetrics(context.Background(), set, cfg, msink)
	require.NoError(t, err)
	pm, err := f.CreateProfilesToMetrics(context.Background(), set, cfg, msink)
	require.NoError(t, err)
	c := tm.(*tracesMetricsHalf).c
	for _, half := range []component.Component{tm, pm} {
		require.NoError(t, half.Start(context.Background(), componenttest.NewNopHost()))
	}
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	w.cpuEvery(on{tid: mainTID, trace: 2, span: 2, route: "/hog", stack: r.stack(js("hogCPU", "/a.js", 1))}, 110, 150)
	require.NoError(t, pm.ConsumeProfiles(context.Background(), r.pd))
	td := traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 200, name: "GET /wait", route: "/wait", server: true})
	require.NoError(t, tm.ConsumeTraces(context.Background(), td))
	assert.Equal(t, 1, td.SpanCount(), "the batch handed in is left as it was")
	_, enriched := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().Get(AttrSamples)
	assert.False(t, enriched)
	require.NoError(t, tm.Shutdown(context.Background()))
	require.NoError(t, pm.Shutdown(context.Background()), "the last half sends the metrics")
	require.NotEmpty(t, msink.AllMetrics())
	var got float64
	forEachMetric(msink.AllMetrics()[len(msink.AllMetrics())-1], MetricWaitInflicted, func(m pmetric.Metric) {
		got += m.Sum().DataPoints().At(0).DoubleValue()
	})
	assert.InDelta(t, 50.0, got, 1e-9)
	assert.Nil(t, c.next)
}
