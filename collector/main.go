// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

// Command otelcol-thread-ctx is the OpenTelemetry Collector distribution this repository's tests
// and demo stream profiles into, and the one collector/node.yaml deploys on each node: the OTLP
// receiver, the memory_limiter processor, the file and OTLP exporters, the spanprofiles and
// spanmetrics connectors and the file_storage extension, from one Collector release (see go.mod). It is what the Collector Builder
// (ocb) would generate from a manifest with those components, written out so that a build needs
// only `go build` and the checked-in go.sum.
package main

import (
	"log"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/otelcol"
)

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol-thread-ctx",
			Description: "OpenTelemetry Collector for otel-thread-ctx tests and demo",
			Version:     "0.161.0",
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					fileprovider.NewFactory(),
					envprovider.NewFactory(),
					// --set=KEY=VALUE reaches the configuration as a `yaml:` URI: without this
					// provider every --set fails with `unsupported scheme on URI "yaml:..."`.
					yamlprovider.NewFactory(),
				},
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		log.Fatalf("collector exited with an error: %v", err)
	}
}
