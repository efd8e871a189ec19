package spanprofilesconnector

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Two Collectors (two nodes of a DaemonSet) count the same service: each one's series carry its
// own service.instance.id (Prometheus's `instance`), so their cumulative sums never meet.
func TestEachCollectorsSeriesAreItsOwn(t *testing.T) {
	var resources []pcommon.Map
	for _, id := range []string{"collector-node-a", "collector-node-b"} {
		res := pcommon.NewResource()
		res.Attributes().PutStr(attrServiceInstanceID, id)
		m := newWaitMetrics(defaultMetricsConfig(), 1, func(string) {})
		m.instance = collectorInstance(res)
		holdBy(m, 1, map[string]float64{"hot (a.js:1)": 10})
		md := m.emit(2)
		require.Equal(t, 1, md.ResourceMetrics().Len())
		resources = append(resources, md.ResourceMetrics().At(0).Resource().Attributes())
	}
	for i, want := range []string{"collector-node-a", "collector-node-b"} {
		got, _ := resources[i].Get(attrServiceInstanceID)
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
	m.observe("quiet", span, &joined{cpuTrace: 10e6, hasCPU: true, seen: true}, func(pcommon.TraceID) string { return "" })
	md := m.emit(2)
	require.Positive(t, md.DataPointCount())
	var names []string
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		names = append(names, ms.At(i).Name())
	}
	assert.Equal(t, []string{MetricSpanTime, MetricSpanHeldShare}, names)
}
