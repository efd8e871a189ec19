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
)

// The metrics side of the one state: a metrics pipeline that receives from the connector gets
// its metrics. The Collector hands each input batch to every half that takes that input, so
// where a traces (or profiles) -> traces half exists, it alone takes the input and the metrics
// half only sends the metrics; without one (a Collector that wants the metrics only), the
// metrics half takes the input itself.

func createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	sc, err := stateOf(set, cfg)
	if err != nil {
		return nil, err
	}
	c := sc.Unwrap()
	c.mu.Lock()
	c.metricsNext = next
	c.mu.Unlock()
	return &tracesMetricsHalf{half{sc, c}}, nil
}

func createProfilesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (xconnector.Profiles, error) {
	sc, err := stateOf(set, cfg)
	if err != nil {
		return nil, err
	}
	c := sc.Unwrap()
	c.mu.Lock()
	c.metricsNext = next
	c.mu.Unlock()
	return &profilesMetricsHalf{half{sc, c}}, nil
}

// tracesMetricsHalf takes spans only when no traces -> traces half does; it never changes the
// batch it is handed (it copies what it keeps), so the Collector need not copy it for this half.
type tracesMetricsHalf struct{ half }

func (tracesMetricsHalf) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

func (t *tracesMetricsHalf) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if t.c.hasHalf(&t.c.tracesToTraces) {
		return nil
	}
	own := ptrace.NewTraces()
	td.CopyTo(own)
	return t.c.consumeTraces(ctx, own)
}

// profilesMetricsHalf takes profiles only when no profiles -> traces half does.
type profilesMetricsHalf struct{ half }

func (profilesMetricsHalf) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

func (p *profilesMetricsHalf) ConsumeProfiles(ctx context.Context, pd pprofile.Profiles) error {
	if p.c.hasHalf(&p.c.profilesToTraces) {
		return nil
	}
	return p.c.consumeProfiles(ctx, pd)
}

// hasHalf reads one of the state's flags of which halves were created.
func (c *spanProfiles) hasHalf(flag *bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return *flag
}
