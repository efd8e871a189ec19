// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

// Package spanpathprocessor is the trace tier's `span_path` processor (collector/tier.yaml):
// after groupbytrace, which hands it each trace's spans together, it writes each first
// request's path across the services of the whole trace (spanprofilesconnector.WritePaths). A
// package of its own, so that the Collector Builder, which calls each component's NewFactory,
// can build it.
package spanpathprocessor // import "github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/spanpathprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector"
)

var componentType = component.MustNewType("span_path")

// NewFactory returns the factory of the `span_path` processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(componentType,
		func() component.Config { return createDefaultConfig() },
		processor.WithTraces(createTraces, component.StabilityLevelDevelopment))
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	topN := cfg.(*Config).TopFrames
	return processorhelper.NewTraces(ctx, set, cfg, next, func(_ context.Context, td ptrace.Traces) (ptrace.Traces, error) {
		spanprofilesconnector.WritePaths(td, topN)
		return td, nil
	}, processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
}
