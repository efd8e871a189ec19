// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// metricsHarness is a harness whose connector also feeds a metrics pipeline.
type metricsHarness struct {
	*harness
	msink   *consumertest.MetricsSink
	metrics connector.Traces
}

func newMetricsHarness(t *testing.T, mutate func(*Config)) *metricsHarness {
	t.Helper()
	h := newHarness(t, mutate)
	mh := &metricsHarness{harness: h, msink: &consumertest.MetricsSink{}}
	f := NewFactory()
	set := connectortest.NewNopSettings(component.MustNewType(typeStr))
	set.ID = h.id
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	var err error
	mh.metrics, err = f.CreateTracesToMetrics(context.Background(), set, h.c.cfg, mh.msink)
	require.NoError(t, err)
	require.Same(t, h.c, mh.metrics.(*tracesMetricsHalf).c, "one state per component id")
	require.NoError(t, mh.metrics.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, mh.metrics.Shutdown(context.Background())) })
	return mh
}

// flush sends the metrics now, whatever the interval.
func (h *metricsHarness) flush() {
	h.c.mu.Lock()
	md, next := h.c.metricsDue(h.c.now(), true)
	h.c.mu.Unlock()
	h.c.emitMetrics(context.Background(), md, next)
}

// lastPoints returns the points of metric `name` in the last batch, by their attributes
// ("k=v,k=v" in the emitted order).
func (h *metricsHarness) lastPoints(name string) map[string]pmetric.NumberDataPoint {
	h.t.Helper()
	all := h.msink.AllMetrics()
	require.NotEmpty(h.t, all, "no metrics were emitted")
	out := map[string]pmetric.NumberDataPoint{}
	forEachMetric(all[len(all)-1], name, func(m pmetric.Metric) {
		dps := m.Sum().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			out[attrString(dps.At(i).Attributes())] = dps.At(i)
		}
	})
	return out
}

func forEachMetric(md pmetric.Metrics, name string, f func(pmetric.Metric)) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if ms.At(k).Name() == name {
					f(ms.At(k))
				}
			}
		}
	}
}

func attrString(m pcommon.Map) string {
	s := ""
	m.Range(func(k string, v pcommon.Value) bool {
		if s != "" {
			s += ","
		}
		s += k + "=" + v.AsString()
		return true
	})
	return s
}

// folds reads otelcol_connector_spanprofiles_metric_folds for one folded attribute.
func (h *metricsHarness) folds(attribute string) int64 {
	h.t.Helper()
	m, err := h.tel.GetMetric("otelcol_connector_spanprofiles_metric_folds")
	if err != nil {
		return 0
	}
	var n int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if v, ok := dp.Attributes.Value("attribute"); ok && v.AsString() == attribute {
			n += dp.Value
		}
	}
	return n
}

// preempted adds an off-CPU interval during which the thread stayed runnable: it waited for a
// CPU (the agent's `thread.off_cpu.state` = `preempted`).
func (w *processWindow) preempted(at on, from, to float64) *processWindow {
	w.offCPU(at, from, to)
	s := w.off.Samples().At(w.off.Samples().Len() - 1)
	s.AttributeIndices().Append(w.r.attr("thread.off_cpu.state", "preempted"))
	return w
}

// blocked adds an off-CPU interval the thread slept through, as the agent labels it.
func (w *processWindow) blocked(at on, from, to float64) *processWindow {
	w.offCPU(at, from, to)
	s := w.off.Samples().At(w.off.Samples().Len() - 1)
	s.AttributeIndices().Append(w.r.attr("thread.off_cpu.state", "blocked"))
	return w
}
