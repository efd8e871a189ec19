// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// held_by lists the traces that held the thread longest (top_frames of them, each at least 1 %
// of the span); the others are a remainder, so listed and remainder add up to the other
// requests' time; the same time rolled up by route, past top_frames routes as one entry.
func TestHeldByListsTheLongestAndCountsTheRest(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TopFrames = 2 })
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	a := r.stack(js("a", "/srv/a.js", 1))
	b := r.stack(js("b", "/srv/b.js", 2))
	c := r.stack(js("c", "/srv/c.js", 3))
	d := r.stack(js("d", "/srv/d.js", 4))
	// The span: 0-100 ms. /a 30 ms (trace 2), /b 20 ms (trace 3) and 10 ms (trace 4) on CPU;
	// /c blocked 0.5 ms (trace 5: under 1 %), /d blocked 1 ms (trace 6).
	w.cpuEvery(on{tid: mainTID, trace: 2, span: 2, route: "/a", stack: a}, 10, 30)
	w.cpuEvery(on{tid: mainTID, trace: 3, span: 3, route: "/b", stack: b}, 40, 50)
	w.cpuAt(on{tid: mainTID, trace: 4, span: 4, route: "/b", stack: b}, 60)
	w.blocked(on{tid: mainTID, trace: 5, span: 5, route: "/c", stack: c}, 70, 70.5)
	w.blocked(on{tid: mainTID, trace: 6, span: 6, route: "/d", stack: d}, 80, 81)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 0, end: 100, name: "GET /wait", route: "/wait", server: true}))

	s := h.received()[spanID(1)]
	other := attrDouble(t, s, AttrCPUOtherTracesMs) + attrDouble(t, s, AttrOffCPUOtherTracesMs)
	assert.InDelta(t, 61.5, other, 1e-9)
	ev := profileEvent(t, s)
	assert.Equal(t, []string{
		"/a 02020202020202020202020202020202 30.0ms: a (a.js:1)",
		"/b 03030303030303030303030303030303 20.0ms: b (b.js:2)",
	}, eventStrings(ev, EventHeldBy))
	others, ok := ev.Get(EventHeldByOthers)
	require.True(t, ok)
	othersMs, ok := ev.Get(EventHeldByOthersMs)
	require.True(t, ok)
	assert.Equal(t, int64(3), others.Int(), "traces 4, 5 and 6")
	assert.InDelta(t, 11.5, othersMs.Double(), 1e-9)
	assert.InDelta(t, other, 30+20+othersMs.Double(), 1e-9, "listed and remainder add up")
	assert.Equal(t, []string{
		"/a 30.0ms in 1 requests: a (a.js:1)",
		"/b 30.0ms in 2 requests: b (b.js:2)",
		"(2 other routes) 1.5ms in 2 requests",
	}, eventStrings(ev, EventHeldByRoutes))
}

// A span no other request held has no remainder and no roll-up.
func TestNoHolderNoRemainder(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	w.cpuAt(on{tid: mainTID, trace: 1, span: 1, stack: r.stack(js("f", "/a.js", 1))}, 50)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 0, end: 100, server: true}))
	ev := profileEvent(t, h.received()[spanID(1)])
	for _, k := range []string{EventHeldBy, EventHeldByOthers, EventHeldByOthersMs, EventHeldByRoutes} {
		_, ok := ev.Get(k)
		assert.False(t, ok, k)
	}
}

// A thread switched out while still runnable waited for a CPU: that time is runnable_ms, not
// blocked time of whichever trace was active, and that trace is not said to have held it.
func TestRunnableTimeIsItsOwnField(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	hog := r.stack(js("hog", "/srv/app/service.js", 12))
	mine := r.stack(js("respond", "/srv/app/service.js", 40))
	// The span 0-100: preempted 20-35 in its own code, 40-60 while /hog ran (trace 2),
	// 70-72 with no span; blocked 80-90 in its own code.
	w.preempted(on{tid: mainTID, trace: 1, span: 1, route: "/wait", stack: mine}, 20, 35)
	w.preempted(on{tid: mainTID, trace: 2, span: 2, route: "/hog", stack: hog}, 40, 60)
	w.preempted(on{tid: mainTID, stack: mine}, 70, 72)
	w.blocked(on{tid: mainTID, trace: 1, span: 1, route: "/wait", stack: mine}, 80, 90)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 0, end: 100, name: "GET /wait", route: "/wait", server: true}))

	s := h.received()[spanID(1)]
	assert.InDelta(t, 37.0, attrDouble(t, s, AttrOffCPURunnableMs), 1e-9)
	assert.InDelta(t, 10.0, attrDouble(t, s, AttrOffCPUTraceMs), 1e-9)
	assert.Zero(t, attrDouble(t, s, AttrOffCPUOtherTracesMs))
	assert.Zero(t, attrDouble(t, s, AttrOffCPUNoSpanMs))
	ev := profileEvent(t, s)
	assert.Empty(t, eventStrings(ev, EventHeldBy), "a preempted holder held nothing")
}

// Off-CPU samples without a state (a profiler that does not tell) are read as asleep, as before.
func TestOffCPUWithoutStateIsBlocked(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	w.offCPU(on{tid: mainTID, trace: 1, span: 1, stack: r.stack(js("f", "/a.js", 1))}, 10, 30)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 0, end: 100, server: true}))
	s := h.received()[spanID(1)]
	assert.InDelta(t, 20.0, attrDouble(t, s, AttrOffCPUTraceMs), 1e-9)
	assert.Zero(t, attrDouble(t, s, AttrOffCPURunnableMs))
}
