package spanprofilesconnector

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
)

// pathProcessorType is the trace tier's processor (collector/tier.yaml): after groupbytrace,
// which hands it each trace's spans together, it writes each first request's path across the
// services of the whole trace (pathwhole.go).
var pathProcessorType = component.MustNewType("span_path")

// PathConfig is the span_path processor's configuration.
type PathConfig struct {
	// TopFrames is how many hops the path event lists (the rest as a count and their ms), as
	// the spanprofiles connector's top_frames.
	TopFrames int `mapstructure:"top_frames"`
}

func (c *PathConfig) Validate() error {
	if c.TopFrames < 1 || c.TopFrames > maxTopFrames {
		return fmt.Errorf("top_frames is %d: expected 1 to %d", c.TopFrames, maxTopFrames)
	}
	return nil
}

// NewPathProcessorFactory returns the factory of the `span_path` processor.
func NewPathProcessorFactory() processor.Factory {
	return processor.NewFactory(pathProcessorType,
		func() component.Config { return &PathConfig{TopFrames: createDefaultConfig().TopFrames} },
		processor.WithTraces(createPathProcessor, component.StabilityLevelDevelopment))
}

func createPathProcessor(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	topN := cfg.(*PathConfig).TopFrames
	return processorhelper.NewTraces(ctx, set, cfg, next, func(_ context.Context, td ptrace.Traces) (ptrace.Traces, error) {
		writePaths(td, topN)
		return td, nil
	}, processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
}
