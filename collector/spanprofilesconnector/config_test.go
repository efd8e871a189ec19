// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, confmap.Validate(cfg))
}

// The README's example, as a user writes it (testdata/config.yaml).
func TestConfigFromYAMLValues(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	load := func(id string) (*Config, error) {
		cfg := NewFactory().CreateDefaultConfig().(*Config)
		sub, err := cm.Sub(id)
		require.NoError(t, err)
		return cfg, sub.Unmarshal(cfg)
	}
	cfg, err := load("span_profiles")
	require.NoError(t, err)
	assert.Equal(t, createDefaultConfig(), cfg)

	cfg, err = load("span_profiles/custom")
	require.NoError(t, err)
	assert.Equal(t, 15*time.Second, cfg.MaxWait)
	assert.Equal(t, 2*time.Minute, cfg.Retention)
	assert.Equal(t, 1000, cfg.MaxPendingSpans)
	assert.Equal(t, 3, cfg.TopFrames)
	assert.Equal(t, createDefaultConfig().MaxSamples, cfg.MaxSamples, "the rest keeps its default")
	require.NoError(t, confmap.Validate(cfg))

	_, err = load("span_profiles/typo")
	require.ErrorContains(t, err, "max_wiat")
}

// A value the Collector cannot decode is quoted, with its setting: an environment variable
// expanded into it (`max_wait: ${env:SPANPROFILES_MAX_WAIT}`) is found by its value.
func TestConfigDecodingErrorsQuoteTheValue(t *testing.T) {
	for given, want := range map[string]string{
		"max_wait=abc":                  `max_wait: invalid duration "abc": expected a number and a unit`,
		"retention=5 minutes":           `retention: invalid duration "5 minutes"`,
		"max_pending_spans=lot":         `max_pending_spans: invalid number "lot": expected a whole number`,
		"top_frames=3.5":                `top_frames: invalid number "3.5"`,
		"metrics::flush_interval=often": `metrics::flush_interval: invalid duration "often"`,
	} {
		t.Run(given, func(t *testing.T) {
			key, value, _ := strings.Cut(given, "=")
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			require.ErrorContains(t, confmap.NewFromStringMap(map[string]any{key: value}).Unmarshal(cfg), want)
		})
	}
	// A good duration still decodes.
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"max_wait": "45s", "max_samples": 1000}).Unmarshal(cfg))
	assert.Equal(t, 45*time.Second, cfg.MaxWait)
	assert.Equal(t, 1000, cfg.MaxSamples)
}

func TestConfigErrorsSayWhatIsExpected(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"max_wait too short":        {func(c *Config) { c.MaxWait = time.Millisecond }, "max_wait is 1ms: expected between 1s and 24h0m0s"},
		"retention below wait":      {func(c *Config) { c.Retention = c.MaxWait - time.Second }, "retention is 29s: expected at least max_wait (30s)"},
		"no pending spans":          {func(c *Config) { c.MaxPendingSpans = 0 }, "max_pending_spans is 0: expected a positive number"},
		"no samples":                {func(c *Config) { c.MaxSamples = -1 }, "max_samples is -1: expected a positive number"},
		"no processes":              {func(c *Config) { c.MaxProcesses = 0 }, "max_processes is 0: expected a positive number"},
		"top frames out of 1-50":    {func(c *Config) { c.TopFrames = 51 }, "top_frames is 51: expected 1 to 50"},
		"metrics flushed too often": {func(c *Config) { c.Metrics.FlushInterval = time.Millisecond }, "metrics::flush_interval is 1ms: expected between 100ms and 1h0m0s"},
		"no routes":                 {func(c *Config) { c.Metrics.MaxRoutes = 0 }, "metrics::max_routes is 0: expected 1 to 1000000"},
		"series past a million":     {func(c *Config) { c.Metrics.MaxSeries = 2_000_000 }, "metrics::max_series is 2000000: expected 1 to 1000000 series per metric"},
		"no batch spans":            {func(c *Config) { c.MaxBatchSpans = 0 }, "max_batch_spans is 0: expected a positive number"},
		"batch bytes too small":     {func(c *Config) { c.MaxBatchBytes = 1000 }, "max_batch_bytes is 1000: expected at least 65536"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := createDefaultConfig()
			tc.mutate(cfg)
			require.ErrorContains(t, confmap.Validate(cfg), tc.want)
		})
	}
}

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, component.MustNewType("span_profiles"), f.Type())
	assert.Equal(t, component.StabilityLevelDevelopment, f.TracesToTracesStability())
	assert.Equal(t, component.StabilityLevelDevelopment, f.ProfilesToTracesStability())
	// The connector takes traces and profiles and emits traces and metrics, nothing else.
	assert.Equal(t, component.StabilityLevelDevelopment, f.TracesToMetricsStability())
	assert.Equal(t, component.StabilityLevelDevelopment, f.ProfilesToMetricsStability())
	assert.Equal(t, component.StabilityLevelUndefined, f.TracesToLogsStability())
	assert.Equal(t, component.StabilityLevelUndefined, f.ProfilesToProfilesStability())
}

// The type before the snake-case rename still names this factory: the Collector's factory map
// takes the alias the factory declares (and logs "\"spanprofiles\" alias is deprecated" when a
// configuration uses it: __test__/e2e/collector-configs.test.js runs that on the real Collector),
// and the factory creates components under it.
func TestDeprecatedTypeStillCreates(t *testing.T) {
	f := NewFactory()
	aliased, ok := f.(interface{ DeprecatedAlias() component.Type })
	require.True(t, ok, "the factory declares no deprecated alias")
	assert.Equal(t, component.MustNewType("spanprofiles"), aliased.DeprecatedAlias())
	set := connectortest.NewNopSettings(component.MustNewType("spanprofiles"))
	c, err := f.CreateTracesToTraces(context.Background(), set, f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, c.Shutdown(context.Background()))
	_, err = f.CreateTracesToTraces(context.Background(), connectortest.NewNopSettings(component.MustNewType("span_profile")), f.CreateDefaultConfig(), consumertest.NewNop())
	require.Error(t, err, "a type that is neither the name nor its alias")
}
