// Package spanpathprocessor is the trace tier's `span_path` processor (collector/tier.yaml):
// after groupbytrace, which hands it each trace's spans together, it writes each first
// request's path across the services of the whole trace (spanprofilesconnector.WritePaths). A
// package of its own, so that the Collector Builder, which calls each component's NewFactory,
// can build it.
package spanpathprocessor // import "otel-thread-ctx/collector/spanprofilesconnector/spanpathprocessor"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"otel-thread-ctx/collector/spanprofilesconnector"
)

var componentType = component.MustNewType("span_path")

// maxTopFrames is the spanprofiles connector's bound on its top_frames.
const maxTopFrames = 50

// Config is the span_path processor's configuration.
type Config struct {
	// TopFrames is how many hops the path event lists (the rest as a count and their ms), as
	// the spanprofiles connector's top_frames.
	TopFrames int `mapstructure:"top_frames"`
}

// Validate refuses a top_frames out of 1 to 50.
func (c *Config) Validate() error {
	if c.TopFrames < 1 || c.TopFrames > maxTopFrames {
		return fmt.Errorf("top_frames is %d: expected 1 to %d", c.TopFrames, maxTopFrames)
	}
	return nil
}

// NewFactory returns the factory of the `span_path` processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(componentType,
		func() component.Config { return &Config{TopFrames: 5} },
		processor.WithTraces(createTraces, component.StabilityLevelDevelopment))
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	topN := cfg.(*Config).TopFrames
	return processorhelper.NewTraces(ctx, set, cfg, next, func(_ context.Context, td ptrace.Traces) (ptrace.Traces, error) {
		spanprofilesconnector.WritePaths(td, topN)
		return td, nil
	}, processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
}
