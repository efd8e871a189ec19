// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
)

// What the agent puts on a window's profiles where it read the process's cgroup: how long its
// CPU quota throttled it during the window (cgroup v2's throttled_usec, v1's throttled_time),
// in how many quota periods, and whose quota that was (the cgroup, or the ancestor throttled
// longest). The agent's encoder (thread-ctx/otlp/src/encode.rs) is the other side.
const (
	attrCgroupThrottledNs = "thread_ctx.cgroup.cpu.throttled_ns"
	attrCgroupNrThrottled = "thread_ctx.cgroup.cpu.nr_throttled"
	attrCgroupPath        = "thread_ctx.cgroup.path"
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

// maxThrottledNs bounds what one window may claim: a day of throttling on each of 4,096 CPUs.
const maxThrottledNs = int64(24*3600*1e9) * 4096

// cgroupThrottling is a window's throttling, as the agent read it.
type cgroupThrottling struct {
	ns, periods int64
	cgroup      string
}

// readThrottling reads the throttling a profile carries; a value out of range is ignored.
func readThrottling(d *profiledict.Dictionary, p pprofile.Profile) (cgroupThrottling, bool) {
	var t cgroupThrottling
	found := false
	attrs := p.AttributeIndices()
	for i := 0; i < attrs.Len(); i++ {
		k, v, ok := d.Attribute(attrs.At(i))
		if !ok {
			continue
		}
		switch {
		case k == attrCgroupThrottledNs && v.Type() == pcommon.ValueTypeInt && v.Int() >= 0 && v.Int() <= maxThrottledNs:
			t.ns, found = v.Int(), true
		case k == attrCgroupNrThrottled && v.Type() == pcommon.ValueTypeInt && v.Int() >= 0:
			t.periods = v.Int()
		case k == attrCgroupPath && v.Type() == pcommon.ValueTypeStr:
			t.cgroup = profiledict.Truncate(v.Str())
		}
	}
	return t, found
}

// addThrottling adds the throttling of a window that overlaps the span.
func (j *joined) addThrottling(w *window, st spanTimes) {
	if w.throttling.ns <= 0 || w.start >= st.end || w.end <= st.start {
		return
	}
	j.throttling.ns += w.throttling.ns
	j.throttling.periods += w.throttling.periods
	if j.throttling.cgroup == "" {
		j.throttling.cgroup = w.throttling.cgroup
	}
}

// putThrottling names the CPU quota on the span's event, where its windows saw it throttle.
func putThrottling(ea pcommon.Map, j *joined) {
	if j.throttling.ns <= 0 {
		return
	}
	ea.PutDouble(EventCgroupThrottledMs, float64(j.throttling.ns)/1e6)
	ea.PutInt(EventCgroupNrThrottled, j.throttling.periods)
	if j.throttling.cgroup != "" {
		ea.PutStr(EventCgroupPath, j.throttling.cgroup)
	}
}
