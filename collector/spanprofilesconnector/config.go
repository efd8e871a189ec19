// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
)

// Config is the `span_profiles` connector's configuration. Every field has a default
// (createDefaultConfig) sized for one node: 20 services at 200 requests/s with 3 spans each and
// the agent's 10 s windows stay well inside them (docs/benchmarks.md).
type Config struct {
	// MaxWait is how long a span waits for the profile windows that cover it. The agent sends
	// a window when it ends (every 10 s by default, `--interval`), so a span that ended just
	// after a window began waits about one interval: keep MaxWait above the agent's interval
	// plus its export time. Past it the span goes on unenriched (counted).
	MaxWait time.Duration `mapstructure:"max_wait"`
	// Retention is how long a profile window is kept after it arrived, for spans that arrive
	// later than their window (an SDK exports a span up to its batch delay, 5 s by default,
	// after it ends). At least MaxWait.
	Retention time.Duration `mapstructure:"retention"`
	// MaxPendingSpans bounds the spans held while they wait. A batch that would pass it is
	// sent on at once, its spans that cannot be enriched yet unenriched (counted).
	MaxPendingSpans int `mapstructure:"max_pending_spans"`
	// MaxSamples bounds the profile samples held for all processes together (about 40 bytes
	// each). Past it the oldest windows are dropped (counted).
	MaxSamples int `mapstructure:"max_samples"`
	// MaxProcesses bounds the processes whose windows are held. Past it the process whose
	// newest window is oldest is forgotten (counted).
	MaxProcesses int `mapstructure:"max_processes"`
	// TopFrames is how many entries `top_frames`, `held_by` and `top_alloc_frames` keep.
	TopFrames int `mapstructure:"top_frames"`
	// MaxBatchSpans and MaxBatchBytes bound each batch of spans the connector sends on: an agent
	// window releases every span it covers at once, tens of thousands, more than a backend takes
	// in one request (batches.go).
	MaxBatchSpans int `mapstructure:"max_batch_spans"`
	MaxBatchBytes int `mapstructure:"max_batch_bytes"`
	// Storage names a storage extension (contrib's file_storage) that keeps the spans the
	// connector holds, so that a crash loses none of them (internal/heldspans). None: a crash loses up
	// to max_wait of spans.
	Storage *component.ID `mapstructure:"storage"`
	// Metrics bounds the metrics a metrics pipeline takes from the connector (metrics_config.go).
	Metrics MetricsConfig `mapstructure:"metrics"`
}

const (
	// One agent window is 1 s at least and 10 s by default; a wait shorter than a second can
	// only ever pass spans through.
	minMaxWait = time.Second
	// A span or window held longer than a day is a misconfiguration, not a choice.
	maxDuration  = 24 * time.Hour
	maxTopFrames = 50
	// A batch smaller than 64 KiB holds a few dozen enriched spans: a request per few spans.
	minMaxBatchBytes = 64 << 10
)

func createDefaultConfig() *Config {
	return &Config{
		MaxWait:         30 * time.Second,
		Retention:       60 * time.Second,
		MaxPendingSpans: 200_000,
		MaxSamples:      2_000_000,
		MaxProcesses:    4_096,
		TopFrames:       5,
		MaxBatchSpans:   4_096,
		// 3 MiB: under the 4 MiB that Jaeger's and the Collector's OTLP gRPC receivers take by
		// default, with room for processors after this one to add attributes.
		MaxBatchBytes: 3 << 20,
		Metrics:       defaultMetricsConfig(),
	}
}

// Validate checks the configuration when the Collector starts.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxWait < minMaxWait || c.MaxWait > maxDuration {
		errs = append(errs, fmt.Errorf("max_wait is %v: expected between %v and %v (more than the agent's --interval, 10s by default)", c.MaxWait, minMaxWait, maxDuration))
	}
	if c.Retention < c.MaxWait || c.Retention > maxDuration {
		errs = append(errs, fmt.Errorf("retention is %v: expected at least max_wait (%v) and at most %v", c.Retention, c.MaxWait, maxDuration))
	}
	if c.MaxPendingSpans < 1 {
		errs = append(errs, fmt.Errorf("max_pending_spans is %d: expected a positive number of spans", c.MaxPendingSpans))
	}
	if c.MaxSamples < 1 {
		errs = append(errs, fmt.Errorf("max_samples is %d: expected a positive number of samples", c.MaxSamples))
	}
	if c.MaxProcesses < 1 {
		errs = append(errs, fmt.Errorf("max_processes is %d: expected a positive number of processes", c.MaxProcesses))
	}
	if c.TopFrames < 1 || c.TopFrames > maxTopFrames {
		errs = append(errs, fmt.Errorf("top_frames is %d: expected 1 to %d", c.TopFrames, maxTopFrames))
	}
	if c.MaxBatchSpans < 1 {
		errs = append(errs, fmt.Errorf("max_batch_spans is %d: expected a positive number of spans", c.MaxBatchSpans))
	}
	if c.MaxBatchBytes < minMaxBatchBytes {
		errs = append(errs, fmt.Errorf("max_batch_bytes is %d: expected at least %d (64 KiB), under what the backend takes in one request (4 MiB for Jaeger's OTLP gRPC by default)", c.MaxBatchBytes, minMaxBatchBytes))
	}
	errs = append(errs, c.Metrics.validate())
	return errors.Join(errs...)
}

// Unmarshal reads the configuration as the Collector would, but first checks every duration and
// number given as text, so that an error quotes the value: the Collector's own decoding drops it
// (`SPANPROFILES_MAX_WAIT=abc` gave "invalid duration"), which leaves an operator guessing which
// setting, or which environment variable expanded into it, was wrong.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	if err := errors.Join(textErrors(conf, reflect.TypeOf(*c), "")...); err != nil {
		return err
	}
	return conf.Unmarshal(c)
}

// textErrors checks the durations and whole numbers of struct type t (nested structs too, under
// their key) that conf gives as text, and quotes each one that does not parse.
func textErrors(conf *confmap.Conf, t reflect.Type, prefix string) []error {
	var errs []error
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("mapstructure")
		if tag == "" || tag == "-" {
			continue
		}
		key, kind := prefix+tag, t.Field(i).Type
		if kind.Kind() == reflect.Struct {
			errs = append(errs, textErrors(conf, kind, key+confmap.KeyDelimiter)...)
			continue
		}
		raw, isText := conf.Get(key).(string)
		if !isText {
			continue
		}
		switch {
		case kind == reflect.TypeOf(time.Duration(0)):
			if _, err := time.ParseDuration(raw); err != nil {
				errs = append(errs, fmt.Errorf("%s: invalid duration %q: expected a number and a unit, e.g. 30s, 1m30s, 500ms", key, raw))
			}
		case kind.Kind() == reflect.Int:
			if _, err := strconv.Atoi(raw); err != nil {
				errs = append(errs, fmt.Errorf("%s: invalid number %q: expected a whole number", key, raw))
			}
		}
	}
	return errs
}
