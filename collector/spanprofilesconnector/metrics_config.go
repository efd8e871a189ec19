// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"errors"
	"fmt"
	"time"
)

// MetricsConfig bounds and paces the metrics the connector emits when a metrics pipeline takes
// them (who made whom wait, each route's time by cause). Every series past a bound is folded
// into one whose attribute says `other`, never dropped, and the fold is counted
// (otelcol_connector_spanprofiles_metric_folds).
type MetricsConfig struct {
	// FlushInterval is how often the cumulative series are sent on.
	FlushInterval time.Duration `mapstructure:"flush_interval"`
	// MaxServices bounds the service.name values; later services are `other`.
	MaxServices int `mapstructure:"max_services"`
	// MaxRoutes bounds the http.route values of each service (holders' and delayed routes
	// alike); later routes are `other`.
	MaxRoutes int `mapstructure:"max_routes"`
	// MaxFunctions bounds the code.function values of each holder route: its heaviest lines
	// by inflicted time, elected at each flush (internal/waitmetrics/hitters.go); the others are `other`.
	MaxFunctions int `mapstructure:"max_functions"`
	// MaxSeries bounds the series of each metric; past it a new series is folded into the one
	// whose every attribute but kind and cause is `other`.
	MaxSeries int `mapstructure:"max_series"`
}

// A service's routes and functions are chosen by its code, not by its traffic: 128 routes and
// 10 functions each cover the services seen here (the demo has 6 routes); one service cannot
// take the series of all the others.
func defaultMetricsConfig() MetricsConfig {
	return MetricsConfig{
		FlushInterval: 15 * time.Second,
		MaxServices:   64,
		MaxRoutes:     128,
		MaxFunctions:  10,
		MaxSeries:     10_000,
	}
}

const (
	minFlushInterval = 100 * time.Millisecond
	maxFlushInterval = time.Hour
	// A Prometheus server holds a few million series; one connector's metrics stay a small part.
	maxMetricSeries = 1_000_000
)

func (m MetricsConfig) validate() error {
	var errs []error
	if m.FlushInterval < minFlushInterval || m.FlushInterval > maxFlushInterval {
		errs = append(errs, fmt.Errorf("metrics::flush_interval is %v: expected between %v and %v", m.FlushInterval, minFlushInterval, maxFlushInterval))
	}
	for _, b := range []struct {
		name string
		v    int
	}{{"max_services", m.MaxServices}, {"max_routes", m.MaxRoutes}, {"max_functions", m.MaxFunctions}} {
		if b.v < 1 || b.v > maxMetricSeries {
			errs = append(errs, fmt.Errorf("metrics::%s is %d: expected 1 to %d", b.name, b.v, maxMetricSeries))
		}
	}
	if m.MaxSeries < 1 || m.MaxSeries > maxMetricSeries {
		errs = append(errs, fmt.Errorf("metrics::max_series is %d: expected 1 to %d series per metric", m.MaxSeries, maxMetricSeries))
	}
	return errors.Join(errs...)
}
