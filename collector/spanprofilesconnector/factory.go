// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/xconnector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/metadata"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/sharedcomponent"
)

// NewFactory returns the factory of the `span_profiles` connector (once `spanprofiles`, still
// accepted as a deprecated alias): traces -> traces (the spans to enrich) and profiles ->
// traces (the profiles they are enriched from), and the same two inputs -> metrics (who made
// whom wait), one state per component id shared by them all.
func NewFactory() xconnector.Factory {
	// The type and stability are metadata.yaml's (profiles are still a development signal of
	// OTLP, and the join's contract is new).
	return xconnector.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		xconnector.WithTracesToTraces(createTracesToTraces, metadata.TracesToTracesStability),
		xconnector.WithProfilesToTraces(createProfilesToTraces, metadata.ProfilesToTracesStability),
		xconnector.WithTracesToMetrics(createTracesToMetrics, metadata.TracesToMetricsStability),
		xconnector.WithProfilesToMetrics(createProfilesToMetrics, metadata.ProfilesToMetricsStability),
		// The Collector maps `spanprofiles` to this factory and logs that the name is deprecated.
		xconnector.WithDeprecatedTypeAlias(metadata.DeprecatedType),
	)
}

// shared holds the state of every component id while any of its halves lives: made by the
// first half created, started by the first Start, shut down by the last Shutdown and then
// forgotten, so that a Collector that reloads its configuration starts afresh.
var shared = sharedcomponent.NewMap[component.ID, *spanProfiles]()

// stateOf returns the state of set.ID, made by the first half created.
func stateOf(set connector.Settings, cfg component.Config) (*sharedcomponent.Component[*spanProfiles], error) {
	return shared.LoadOrStore(set.ID, func() (*spanProfiles, error) {
		return newSpanProfiles(cfg.(*Config), set.ID, set.TelemetrySettings)
	})
}

func createTracesToTraces(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Traces) (connector.Traces, error) {
	sc, err := stateOf(set, cfg)
	if err != nil {
		return nil, err
	}
	c := sc.Unwrap()
	c.mu.Lock()
	c.next = next
	c.tracesToTraces = true
	c.mu.Unlock()
	return &tracesHalf{half{sc, c}}, nil
}

func createProfilesToTraces(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Traces) (xconnector.Profiles, error) {
	sc, err := stateOf(set, cfg)
	if err != nil {
		return nil, err
	}
	c := sc.Unwrap()
	c.mu.Lock()
	if c.next == nil {
		c.next = next
	}
	c.profilesToTraces = true
	c.mu.Unlock()
	return &profilesHalf{half{sc, c}}, nil
}

// half is what every half shares: the lifecycle of the one state (its Start and Shutdown are
// the shared component's) and the state itself.
type half struct {
	*sharedcomponent.Component[*spanProfiles]
	c *spanProfiles
}

// tracesHalf takes the spans to enrich; it writes attributes onto them.
type tracesHalf struct{ half }

func (tracesHalf) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

func (t *tracesHalf) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return t.c.consumeTraces(ctx, td)
}

// profilesHalf takes the profiles; it only reads them.
type profilesHalf struct{ half }

func (profilesHalf) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

func (p *profilesHalf) ConsumeProfiles(ctx context.Context, pd pprofile.Profiles) error {
	return p.c.consumeProfiles(ctx, pd)
}
