// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/waitmetrics"
)

// A million requests, each of a route of its own and held by a holder of a route and function
// of its own (a service that puts ids in its routes, or a target that names every function
// anew): the series and the memory stay bounded, and every value past a bound is folded and
// counted, none dropped.
func TestAMillionDistinctRoutesAndFrames(t *testing.T) {
	const n = 1_000_000
	cfg := defaultMetricsConfig()
	folds := map[string]int64{}
	m := newWaitMetrics(cfg, 1, func(a string) { folds[a]++ })
	names := func(pcommon.TraceID) string { return "" }
	span := ptrace.NewSpan()
	span.SetKind(ptrace.SpanKindServer)
	span.SetStartTimestamp(1)
	span.SetEndTimestamp(1 + 100e6)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var total float64
	for i := 0; i < n; i++ {
		span.Attributes().PutStr(profilestore.AttrHTTPRoute, fmt.Sprintf("/users/%d", i))
		j := &profilestore.Joined{Others: map[pcommon.TraceID]*profilestore.Holder{
			{byte(i), byte(i >> 8), byte(i >> 16), 1}: {NS: 2e6, Routes: map[string]int64{fmt.Sprintf("/search/%d", i): 2e6}, Frames: map[profilestore.HoldFrame]int64{
				{Frame: fmt.Sprintf("f%d (a.js:%d)", i, i)}:                1e6,
				{Frame: fmt.Sprintf("g%d (a.js:%d)", i, i), Blocked: true}: 1e6,
			}},
		}, CPUOther: 1e6, OffOther: 1e6, HasCPU: true, HasOff: true, Seen: true}
		m.observe(fmt.Sprintf("svc-%d", i%1000), span, j, names)
		total += 2
	}
	// The flush elects each route's lines and folds the rest.
	md := m.Emit(2)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("series %d, heap grown %.1f MiB, folds %v", m.Series(), float64(grown)/(1<<20), folds)

	assert.LessOrEqual(t, pointsOf(md, MetricWaitInflicted), cfg.MaxSeries+2, "the fold series of each kind on top of max_series")
	assert.LessOrEqual(t, pointsOf(md, MetricSpanTime), cfg.MaxSeries+len(causesMeasured))
	assert.LessOrEqual(t, pointsOf(md, MetricSpanHeldShare), cfg.MaxSeries+1)
	// Services past 64, routes past 128 a service, functions past 10 a route are folded.
	assert.Positive(t, folds[MetricAttrService])
	assert.Positive(t, folds[MetricAttrRoute])
	assert.Positive(t, folds[MetricAttrFunction])
	// The bounds' own memory: 64 services x 128 routes x 10 functions of names, and the series.
	assert.Less(t, grown, int64(64<<20), "heap grew %d bytes", grown)
	var inflicted float64
	forEachMetric(md, MetricWaitInflicted, func(mt pmetric.Metric) {
		for i := 0; i < mt.Sum().DataPoints().Len(); i++ {
			inflicted += mt.Sum().DataPoints().At(i).DoubleValue()
		}
	})
	assert.InDelta(t, total, inflicted, 1e-6*total, "every ms is in some series")
	require.Equal(t, m.Series(), md.DataPointCount(), "every series is sent")
}

// Past max_series, a new series of a metric goes to the one whose attributes are all `other`
// (but kind and cause), counted as a fold of `series`.
func TestSeriesPastTheirBound(t *testing.T) {
	cfg := defaultMetricsConfig()
	cfg.MaxSeries = 2
	folds := map[string]int64{}
	m := newWaitMetrics(cfg, 1, func(a string) { folds[a]++ })
	for i := 0; i < 4; i++ {
		span := ptrace.NewSpan()
		span.SetKind(ptrace.SpanKindServer)
		span.SetStartTimestamp(1)
		span.SetEndTimestamp(1 + 100e6)
		span.Attributes().PutStr(profilestore.AttrHTTPRoute, fmt.Sprintf("/r%d", i))
		j := &profilestore.Joined{Others: map[pcommon.TraceID]*profilestore.Holder{{1}: {NS: 5e6, Routes: map[string]int64{"/hog": 5e6}, Frames: map[profilestore.HoldFrame]int64{{Frame: "f"}: 5e6}}}, CPUOther: 5e6, HasCPU: true, Seen: true}
		m.observe("shop", span, j, func(pcommon.TraceID) string { return "" })
	}
	md := m.Emit(2)
	// The interval holds /r0, /r1 and (past 2) the one all `other`; at the flush that one
	// comes first in order and /r1 is past the bound.
	require.Equal(t, 2, pointsOf(md, MetricWaitInflicted))
	var folded pmetric.NumberDataPoint
	forEachMetric(md, MetricWaitInflicted, func(mt pmetric.Metric) {
		for i := 0; i < mt.Sum().DataPoints().Len(); i++ {
			if dp := mt.Sum().DataPoints().At(i); allOther(dp.Attributes(), MetricAttrService, MetricAttrRoute, MetricAttrFunction, MetricAttrDelayedRoute) {
				folded = dp
			}
		}
	})
	assert.InDelta(t, 15.0, folded.DoubleValue(), 1e-9)
	forEachMetric(md, MetricWaitDelayed, func(mt pmetric.Metric) {
		for i := 0; i < mt.Sum().DataPoints().Len(); i++ {
			if allOther(mt.Sum().DataPoints().At(i).Attributes(), MetricAttrService, MetricAttrRoute, MetricAttrFunction, MetricAttrDelayedRoute) {
				assert.Equal(t, int64(3), mt.Sum().DataPoints().At(i).IntValue())
			}
		}
	})
	require.Equal(t, 3, pointsOf(md, MetricSpanHeldShare))
	forEachMetric(md, MetricSpanHeldShare, func(mt pmetric.Metric) {
		for i := 0; i < mt.Histogram().DataPoints().Len(); i++ {
			if allOther(mt.Histogram().DataPoints().At(i).Attributes(), MetricAttrService, MetricAttrRoute) {
				assert.Equal(t, uint64(2), mt.Histogram().DataPoints().At(i).Count())
			}
		}
	})
	// inflicted: /r2, /r3 in the interval, /r1 at the flush; span.time: /r0's second cause on;
	// held_share: /r2, /r3.
	assert.Equal(t, int64(3+10+2), folds["series"])
}

// causesMeasured is every cause with off-CPU profiles.
var causesMeasured = []string{waitmetrics.CauseOwnCPU, waitmetrics.CauseOtherRequestsCPU, waitmetrics.CauseNoSpanCPU, waitmetrics.CauseBlocked, waitmetrics.CauseOtherRequestsBlocked, waitmetrics.CauseIdle, waitmetrics.CauseCPUStarved}

// pointsOf counts a batch's points of the metric name.
func pointsOf(md pmetric.Metrics, name string) int {
	n := 0
	forEachMetric(md, name, func(mt pmetric.Metric) {
		if mt.Type() == pmetric.MetricTypeHistogram {
			n += mt.Histogram().DataPoints().Len()
		} else {
			n += mt.Sum().DataPoints().Len()
		}
	})
	return n
}

// allOther says whether each of the attributes named is `other`.
func allOther(attrs pcommon.Map, names ...string) bool {
	for _, n := range names {
		if v, ok := attrs.Get(n); !ok || v.Str() != waitmetrics.Other {
			return false
		}
	}
	return true
}
