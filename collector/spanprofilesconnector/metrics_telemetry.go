// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/metadata"
)

// metricsTelemetry is the connector's own account of the metrics it emits: what was folded
// into `other`, how many series it holds, and batches refused (instruments of metadata.yaml).
type metricsTelemetry struct {
	folds, exportErrors metric.Int64Counter
	series              atomic.Int64
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

func newMetricsTelemetry(b *metadata.TelemetryBuilder) (*metricsTelemetry, error) {
	t := &metricsTelemetry{folds: b.ConnectorSpanprofilesMetricFolds, exportErrors: b.ConnectorSpanprofilesMetricExportErrors}
	err := b.RegisterConnectorSpanprofilesMetricSeriesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(t.series.Load())
		return nil
	})
	return t, err
}

func (t *metricsTelemetry) fold(attr string) {
	t.folds.Add(context.Background(), 1, foldAttributes[attr])
}
