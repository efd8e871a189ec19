// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/open-telemetry/opentelemetry-collector-contrib/connector/spanmetricsconnector"
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/healthcheckextension"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/groupbytraceprocessor"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/memorylimiterprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/spanpathprocessor"
)

// components lists the factories of this distribution. There is no batch processor: in this
// release it does not take profiles (a profiles pipeline that lists it fails to build).
func components() (otelcol.Factories, error) {
	var err error
	factories := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if factories.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](
		otlpreceiver.NewFactory(),
	); err != nil {
		return otelcol.Factories{}, err
	}
	if factories.Processors, err = otelcol.MakeFactoryMap[processor.Factory](
		memorylimiterprocessor.NewFactory(),
		// The trace tier (collector/tier.yaml): groupbytrace holds a trace's spans until they
		// have all come, then span_path writes the path across the whole trace's services.
		groupbytraceprocessor.NewFactory(),
		spanpathprocessor.NewFactory(),
	); err != nil {
		return otelcol.Factories{}, err
	}
	if factories.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](
		fileexporter.NewFactory(),
		otlpexporter.NewFactory(),
		// OTLP/HTTP: what Prometheus's OTLP receiver takes (/api/v1/otlp/v1/metrics).
		otlphttpexporter.NewFactory(),
		// loadbalancing: a node Collector sends each trace's spans, keyed by trace id, to one
		// Collector of the trace tier (collector/tier.yaml), where a trace's services meet.
		loadbalancingexporter.NewFactory(),
	); err != nil {
		return otelcol.Factories{}, err
	}
	// spanprofiles joins spans with profiles; spanmetrics after it makes latency histograms
	// whose exemplars lead to the enriched traces.
	// file_storage keeps what a crash would lose on disk: the spans the spanprofiles connector
	// holds and the exporters' persistent sending queues (collector/storage.yaml).
	// health_check answers the manifests' liveness and readiness probes (collector/node.yaml);
	// bearertokenauth refuses OTLP requests without the node's token (collector/auth.yaml).
	if factories.Extensions, err = otelcol.MakeFactoryMap[extension.Factory](
		filestorage.NewFactory(),
		healthcheckextension.NewFactory(),
		bearertokenauthextension.NewFactory(),
	); err != nil {
		return otelcol.Factories{}, err
	}
	if factories.Connectors, err = otelcol.MakeFactoryMap[connector.Factory](
		spanprofilesconnector.NewFactory(),
		spanmetricsconnector.NewFactory(),
	); err != nil {
		return otelcol.Factories{}, err
	}
	return factories, nil
}
