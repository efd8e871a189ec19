// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// throttled puts the agent's reading of the process's cgroup on every profile of the window.
func (w *processWindow) throttled(ns, periods int64, cgroup string) *processWindow {
	for _, p := range []pprofile.Profile{w.cpu, w.off, w.objects, w.alloc} {
		p.AttributeIndices().Append(w.r.attr(profilestore.AttrCgroupThrottledNs, ns), w.r.attr(profilestore.AttrCgroupNrThrottled, periods), w.r.attr(profilestore.AttrCgroupPath, cgroup))
	}
	return w
}

// A span in a window whose process's CPU quota ran out: its event names the quota (the
// cgroup, how long and how often it was throttled in the window) beside its runnable_ms; a
// span in a window without throttling says nothing of it.
func TestThrottlingIsNamedOnTheSpan(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	mine := r.stack(js("respond", "/srv/app/service.js", 40))
	r.window(agentProcess(mainTID), 0, 1000).throttled(812_500_000, 37, "/kubepods/pod1").
		preempted(on{tid: mainTID, trace: 1, span: 1, route: "/wait", stack: mine}, 20, 60)
	r.window(agentProcess(mainTID), 1000, 2000).throttled(0, 0, "/kubepods/pod1").
		cpuAt(on{tid: mainTID, trace: 2, span: 2, route: "/wait", stack: mine}, 1500)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID),
		spanSpec{trace: 1, span: 1, start: 0, end: 100, name: "GET /wait", route: "/wait", server: true},
		spanSpec{trace: 2, span: 2, start: 1400, end: 1600, name: "GET /wait", route: "/wait", server: true},
	))
	got := h.received()
	s := got[spanID(1)]
	assert.InDelta(t, 40.0, attrDouble(t, s, AttrOffCPURunnableMs), 1e-9)
	ev := profileEvent(t, s)
	ms, ok := ev.Get(EventCgroupThrottledMs)
	require.True(t, ok)
	assert.InDelta(t, 812.5, ms.Double(), 1e-9)
	n, _ := ev.Get(EventCgroupNrThrottled)
	assert.Equal(t, int64(37), n.Int())
	path, _ := ev.Get(EventCgroupPath)
	assert.Equal(t, "/kubepods/pod1", path.Str())
	_, named := profileEvent(t, got[spanID(2)]).Get(EventCgroupThrottledMs)
	assert.False(t, named, "no throttling in its window")
}
