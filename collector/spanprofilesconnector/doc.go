// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

// Package spanprofilesconnector is the `span_profiles` connector of the OpenTelemetry Collector:
// it joins the spans of a node's services with the span-linked profiles that `thread-ctx agent`
// sends from the same node, and emits each span with what its thread did while it was open (its
// own CPU, other requests' CPU, CPU with no span, time off CPU, allocated bytes, top frames and
// the traces that held the thread). See README.md for the configuration and the fields.
//
// internal/metadata, documentation.md and generated_*_test.go are generated from metadata.yaml by
// mdatagen v0.161.0 (scripts/mdatagen.sh says how it is built here).
//
//go:generate bash ../../scripts/mdatagen.sh metadata.yaml
package spanprofilesconnector // import "github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector"
