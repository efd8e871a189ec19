// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"os"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// collectorInstance names the Collector whose cumulative series these are. Each Collector of a
// DaemonSet sums from its own start: were two nodes' series of one service the same series, the
// backend would see each node's total in turn, a counter going up and down (Prometheus reads
// resets, or refuses out-of-order samples). The Collector puts its service.instance.id (a UUID
// per process, unless service::telemetry::resource sets one) on its own resource, as
// span_metrics reads it; where there is none (a test's settings), the node's hostname.
func collectorInstance(res pcommon.Resource) string {
	if v, ok := res.Attributes().Get(profilestore.AttrServiceInstanceID); ok && v.AsString() != "" {
		return v.AsString()
	}
	host, _ := os.Hostname()
	return host
}
