// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package profilestore

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
	AttrCgroupThrottledNs = "thread_ctx.cgroup.cpu.throttled_ns"
	AttrCgroupNrThrottled = "thread_ctx.cgroup.cpu.nr_throttled"
	AttrCgroupPath        = "thread_ctx.cgroup.path"
)

// maxThrottledNs bounds what one window may claim: a day of throttling on each of 4,096 CPUs.
const maxThrottledNs = int64(24*3600*1e9) * 4096

// Throttling is a window's throttling, as the agent read it.
type Throttling struct {
	NS, Periods int64
	Cgroup      string
}

// readThrottling reads the throttling a profile carries; a value out of range is ignored.
func readThrottling(d *profiledict.Dictionary, p pprofile.Profile) (Throttling, bool) {
	var t Throttling
	found := false
	attrs := p.AttributeIndices()
	for i := 0; i < attrs.Len(); i++ {
		k, v, ok := d.Attribute(attrs.At(i))
		if !ok {
			continue
		}
		switch {
		case k == AttrCgroupThrottledNs && v.Type() == pcommon.ValueTypeInt && v.Int() >= 0 && v.Int() <= maxThrottledNs:
			t.NS, found = v.Int(), true
		case k == AttrCgroupNrThrottled && v.Type() == pcommon.ValueTypeInt && v.Int() >= 0:
			t.Periods = v.Int()
		case k == AttrCgroupPath && v.Type() == pcommon.ValueTypeStr:
			t.Cgroup = profiledict.Truncate(v.Str())
		}
	}
	return t, found
}

// addThrottling adds the throttling of a window that overlaps the span.
func (j *Joined) addThrottling(w *window, st SpanTimes) {
	if w.throttling.NS <= 0 || w.start >= st.End || w.end <= st.Start {
		return
	}
	j.Throttling.NS += w.throttling.NS
	j.Throttling.Periods += w.throttling.Periods
	if j.Throttling.Cgroup == "" {
		j.Throttling.Cgroup = w.throttling.Cgroup
	}
}
