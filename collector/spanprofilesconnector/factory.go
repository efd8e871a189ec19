// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/xconnector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/metadata"
)

// NewFactory returns the factory of the `span_profiles` connector (once `spanprofiles`, still
// accepted as a deprecated alias): traces -> traces (the spans
// to enrich) and profiles -> traces (the profiles they are enriched from), and the same two
// inputs -> metrics (who made whom wait), one state per component id shared by them all.
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

// shared holds the state of every component id while any of its halves lives.
var shared = struct {
	sync.Mutex
	byID map[component.ID]*spanProfiles
}{byID: map[component.ID]*spanProfiles{}}

// stateOf returns the state of set.ID, made by the first half created.
func stateOf(set connector.Settings, cfg component.Config) (*spanProfiles, error) {
	shared.Lock()
	defer shared.Unlock()
	if c := shared.byID[set.ID]; c != nil {
		return c, nil
	}
	c, err := newSpanProfiles(cfg.(*Config), set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	shared.byID[set.ID] = c
	return c, nil
}

// release forgets the state of id once its last half shut down, so that a Collector that
// reloads its configuration starts afresh.
func release(id component.ID, c *spanProfiles) {
	shared.Lock()
	defer shared.Unlock()
	if shared.byID[id] == c {
		delete(shared.byID, id)
	}
}

func createTracesToTraces(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Traces) (connector.Traces, error) {
	c, err := stateOf(set, cfg)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.next = next
	c.tracesToTraces = true
	c.mu.Unlock()
	return &tracesHalf{half{c, set.ID}}, nil
}

func createProfilesToTraces(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Traces) (xconnector.Profiles, error) {
	c, err := stateOf(set, cfg)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.next == nil {
		c.next = next
	}
	c.profilesToTraces = true
	c.mu.Unlock()
	return &profilesHalf{half{c, set.ID}}, nil
}

// half is what both halves share: the lifecycle of the one state.
type half struct {
	c  *spanProfiles
	id component.ID
}

func (h half) Start(ctx context.Context, host component.Host) error {
	return h.c.start(ctx, host, h.id)
}

func (h half) Shutdown(ctx context.Context) error {
	last, err := h.c.shutdown(ctx)
	if last {
		release(h.id, h.c)
	}
	return err
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
