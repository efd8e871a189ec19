// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package waitmetrics

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// inflicted reads a batch's thread_ctx.wait.inflicted by code.function.
func inflicted(md pmetric.Metrics) map[string]float64 {
	out := map[string]float64{}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for k := 0; k < ms.Len(); k++ {
			if ms.At(k).Name() != MetricWaitInflicted {
				continue
			}
			dps := ms.At(k).Sum().DataPoints()
			for d := 0; d < dps.Len(); d++ {
				f, _ := dps.At(d).Attributes().Get(MetricAttrFunction)
				out[f.Str()] += dps.At(d).DoubleValue()
			}
		}
	}
	return out
}

// Many cheap lines that come first and one hot line that comes last: the hot line keeps its name
// and the largest series; the cheap lines past max_functions go to `other`, each fold counted.
func TestTheHeaviestLinesKeepTheirNames(t *testing.T) {
	folds := map[string]int{}
	m := New(Limits{MaxServices: 64, MaxRoutes: 128, MaxFunctions: 3, MaxSeries: 10_000}, 1, func(a string) { folds[a]++ })
	svc := m.Service("gateway")
	route := m.Route(svc, "/graphql")
	delayed := m.Route(svc, "/wait")
	ex := Exemplar{Trace: pcommon.TraceID{1}, Span: pcommon.SpanID{1}, At: 2}
	for i := 0; i < 20; i++ {
		m.AddWait(svc, route, fmt.Sprintf("resolve%d (schema.js:%d)", i, i), KindCPUHeld, delayed, 10e6, ex)
	}
	m.AddWait(svc, route, "rankProducts (gateway.js:28)", KindCPUHeld, delayed, 600e6, ex)
	m.AddCause(svc, delayed, CauseOtherRequestsCPU, 800e6)
	m.AddShare(svc, delayed, Exemplar{Trace: pcommon.TraceID{1}, Span: pcommon.SpanID{1}, At: 2, Value: 0.8})

	md := m.Emit(2)
	lines := inflicted(md)
	require.Len(t, lines, 4, "3 lines and `other`")
	assert.InDelta(t, 600.0, lines["rankProducts (gateway.js:28)"], 1e-9)
	assert.InDelta(t, 180.0, lines[Other], 1e-9, "18 cheap lines of 10 ms")
	assert.Equal(t, 18, folds[MetricAttrFunction])
	assert.Equal(t, m.Series(), md.DataPointCount(), "every series is sent")
}

// Past max_services a service is `other`, counted.
func TestServicesPastTheirBound(t *testing.T) {
	folds := map[string]int{}
	m := New(Limits{MaxServices: 1, MaxRoutes: 1, MaxFunctions: 1, MaxSeries: 10}, 1, func(a string) { folds[a]++ })
	assert.Equal(t, "shop", m.Service("shop"))
	assert.Equal(t, Other, m.Service("cart"))
	assert.Equal(t, "/a", m.Route("shop", "/a"))
	assert.Equal(t, Other, m.Route("shop", "/b"))
	assert.Equal(t, map[string]int{MetricAttrService: 1, MetricAttrRoute: 1}, folds)
}
