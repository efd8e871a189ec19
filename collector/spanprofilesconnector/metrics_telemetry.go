package spanprofilesconnector

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// metricsTelemetry is the connector's own account of the metrics it emits: what was folded
// into `other`, and how many series it holds.
type metricsTelemetry struct {
	folds        metric.Int64Counter
	series       atomic.Int64
	exportErrors metric.Int64Counter
	registration metric.Registration
}

// The attributes a fold is counted under: the attribute folded, or `series` when a metric
// reached max_series.
var foldAttributes = func() map[string]metric.AddOption {
	m := map[string]metric.AddOption{}
	for _, a := range []string{MetricAttrService, MetricAttrRoute, MetricAttrFunction, "series"} {
		m[a] = metric.WithAttributeSet(attribute.NewSet(attribute.String("attribute", a)))
	}
	return m
}()

func newMetricsTelemetry(set component.TelemetrySettings) (*metricsTelemetry, error) {
	m := set.MeterProvider.Meter("otel-thread-ctx/collector/spanprofilesconnector")
	t := &metricsTelemetry{}
	var err1, err2, err3 error
	t.folds, err1 = m.Int64Counter("otelcol_connector_spanprofiles_metric_folds",
		metric.WithDescription("Values of the connector's metrics folded into `other` past a bound, by the attribute folded (or `series` past max_series)."),
		metric.WithUnit("{values}"))
	t.exportErrors, err2 = m.Int64Counter("otelcol_connector_spanprofiles_metric_export_errors",
		metric.WithDescription("Batches of the connector's metrics the next consumer refused."), metric.WithUnit("{batches}"))
	series, err3 := m.Int64ObservableGauge("otelcol_connector_spanprofiles_metric_series",
		metric.WithDescription("Series the connector's metrics hold, all metrics together."), metric.WithUnit("{series}"))
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(series, t.series.Load())
		return nil
	}, series)
	if err != nil {
		return nil, err
	}
	t.registration = reg
	return t, nil
}

func (t *metricsTelemetry) fold(attr string) {
	t.folds.Add(context.Background(), 1, foldAttributes[attr])
}

func (t *metricsTelemetry) shutdown() error {
	return t.registration.Unregister()
}
