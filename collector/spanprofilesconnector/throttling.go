// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// What the connector writes on the thread_ctx.profile event of a span whose windows saw its
// process throttled: the cgroup's throttling over those windows (the agent's windows, 10 s by
// default: not the span's own share of it), so that a span's off_cpu.runnable_ms is named as
// the CPU quota's doing. Absent when the windows saw no throttling.
const (
	EventCgroupThrottledMs = "thread_ctx.cgroup.throttled_ms"
	EventCgroupNrThrottled = "thread_ctx.cgroup.nr_throttled"
	EventCgroupPath        = "thread_ctx.cgroup.path"
)

// putThrottling names the CPU quota on the span's event, where its windows saw it throttle.
func putThrottling(ea pcommon.Map, j *profilestore.Joined) {
	if j.Throttling.NS <= 0 {
		return
	}
	ea.PutDouble(EventCgroupThrottledMs, float64(j.Throttling.NS)/1e6)
	ea.PutInt(EventCgroupNrThrottled, j.Throttling.Periods)
	if j.Throttling.Cgroup != "" {
		ea.PutStr(EventCgroupPath, j.Throttling.Cgroup)
	}
}
