// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/waitmetrics"
)

// holdBy has one request of /wait held by /gateway in the lines given (ms each).
func holdBy(m *waitMetrics, trace byte, lines map[string]float64) {
	span := ptrace.NewSpan()
	span.SetKind(ptrace.SpanKindServer)
	span.SetTraceID(pcommon.TraceID{trace})
	span.SetStartTimestamp(1)
	span.SetEndTimestamp(1 + 10e9)
	span.Attributes().PutStr(profilestore.AttrHTTPRoute, "/wait")
	frames := map[profilestore.HoldFrame]int64{}
	var total int64
	for f, ms := range lines {
		frames[profilestore.HoldFrame{Frame: f}] = int64(ms * 1e6)
		total += int64(ms * 1e6)
	}
	j := &profilestore.Joined{Others: map[pcommon.TraceID]*profilestore.Holder{{200, trace}: {NS: total, Routes: map[string]int64{"/gateway": total}, Frames: frames}},
		CPUOther: total, HasCPU: true, Seen: true}
	m.observe("gateway", span, j, func(pcommon.TraceID) string { return "" })
}

type linePoint struct {
	function string
	start    pcommon.Timestamp
	ms       float64
}

// inflictedPoints returns a batch's thread_ctx.wait.inflicted points, largest first.
func inflictedPoints(md pmetric.Metrics) []linePoint {
	var out []linePoint
	forEachMetric(md, MetricWaitInflicted, func(mt pmetric.Metric) {
		dps := mt.Sum().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			f, _ := dps.At(i).Attributes().Get(MetricAttrFunction)
			out = append(out, linePoint{f.Str(), dps.At(i).StartTimestamp(), dps.At(i).DoubleValue()})
		}
	})
	slices.SortFunc(out, func(a, b linePoint) int {
		switch {
		case a.ms > b.ms:
			return -1
		case a.ms < b.ms:
			return 1
		}
		return 0
	})
	return out
}

// A GraphQL gateway: 500 cheap resolver lines (1 ms each) come first, then the one hot line
// (600 ms). The hot line has the top series, `other` (the 491 lines past max_functions, 491 ms
// together) comes after it, and every folded line is counted.
func TestTheHotLineHasTheTopSeries(t *testing.T) {
	cfg := defaultMetricsConfig()
	folds := map[string]int64{}
	m := newWaitMetrics(cfg, 1, func(a string) { folds[a]++ })
	for i := 0; i < 500; i++ {
		holdBy(m, byte(i), map[string]float64{fmt.Sprintf("resolve%d (schema.js:%d)", i, i): 1})
	}
	holdBy(m, 1, map[string]float64{"rankProducts (gateway.js:28)": 600})
	points := inflictedPoints(m.Emit(2))
	require.Len(t, points, cfg.MaxFunctions+1, "max_functions lines and `other`")
	assert.Equal(t, "rankProducts (gateway.js:28)", points[0].function)
	assert.InDelta(t, 600.0, points[0].ms, 1e-9)
	assert.Equal(t, waitmetrics.Other, points[1].function)
	assert.InDelta(t, 491.0, points[1].ms, 1e-9, "the 491 lines not elected")
	assert.Equal(t, int64(491), folds[MetricAttrFunction])
	var total float64
	for _, p := range points {
		total += p.ms
	}
	assert.InDelta(t, 1100.0, total, 1e-9, "folded, never dropped")
}

// Over intervals the elected lines change: a series is sent while its line is elected and grows
// monotonically, one voted out is no longer sent, and one elected again starts anew (a new
// StartTimestamp); `other` only grows. A line that becomes the hot one takes the seat within 3
// intervals (45 s: the summary's counts halve every minute).
func TestElectionsKeepCumulativeSeriesMonotonic(t *testing.T) {
	cfg := defaultMetricsConfig()
	cfg.MaxFunctions = 1
	m := newWaitMetrics(cfg, 1, func(string) {})
	type seriesID struct {
		function string
		start    pcommon.Timestamp
	}
	last := map[seriesID]float64{}
	hot := func(interval int) string {
		// a is hot for 3 intervals, then b for 10 (long enough for a's count to decay below b's),
		// then a again.
		switch {
		case interval < 3:
			return "a (x.js:1)"
		case interval < 13:
			return "b (x.js:2)"
		}
		return "a (x.js:1)"
	}
	sent := map[string][]pcommon.Timestamp{}
	const interval = 15e9
	for i := 0; i < 20; i++ {
		// Two requests of /wait: each holder's time goes to its top line on that request.
		holdBy(m, byte(i), map[string]float64{hot(i): 100})
		holdBy(m, byte(100+i), map[string]float64{"c (x.js:3)": 1})
		points := inflictedPoints(m.Emit(pcommon.Timestamp(1 + (i+1)*interval)))
		require.Len(t, points, 2)
		elected := points[0].function
		if elected == waitmetrics.Other {
			elected = points[1].function
		}
		if i < 3 || i >= 6 && i < 13 || i >= 16 {
			assert.Equal(t, hot(i), elected, "interval %d: the hot line is elected", i)
		}
		for _, p := range points {
			id := seriesID{p.function, p.start}
			assert.GreaterOrEqual(t, p.ms, last[id], "interval %d: %s goes down", i, p.function)
			last[id] = p.ms
			if !slices.Contains(sent[p.function], p.start) {
				sent[p.function] = append(sent[p.function], p.start)
			}
		}
	}
	assert.Len(t, sent[waitmetrics.Other], 1, "one `other` series all along")
	assert.Len(t, sent["b (x.js:2)"], 1)
	require.Len(t, sent["a (x.js:1)"], 2, "a voted out, then elected again: a new series")
	again := sent["a (x.js:1)"][1]
	k := int((again - 1) / interval)
	assert.Equal(t, pcommon.Timestamp(1+k*interval), again, "the second starts with the interval it was elected in")
	assert.InDelta(t, 100.0*float64(20-k), last[seriesID{"a (x.js:1)", again}], 1e-9, "every ms of a's from then on")
}
