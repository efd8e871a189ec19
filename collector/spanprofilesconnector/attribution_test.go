// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A handler span inside its server span: the server span's own CPU (cpu.span_ms) is only what
// ran with it active, its trace's (cpu.trace_ms) also what its handler ran. A join that took the
// one for the other would pass every test in which a request is a single span.
func TestSpanAndItsTraceAreToldApart(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	own := r.stack(js("route", "/srv/app/service.js", 70))
	work := r.stack(js("hogCPU", "/srv/app/service.js", 27), js("handle", "/srv/app/service.js", 50))
	// 100-160 ms the server span; 105-155 its handler. The server span's own code at 102 and 157,
	// the handler's every 10 ms from 110 to 150 (5 samples).
	w.cpuAt(on{tid: mainTID, trace: 1, span: 1, route: "/hog", stack: own}, 102, 157)
	w.cpuEvery(on{tid: mainTID, trace: 1, span: 2, route: "/hog", stack: work}, 110, 150)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID),
		spanSpec{trace: 1, span: 1, start: 100, end: 160, name: "GET /hog", route: "/hog", server: true},
		spanSpec{trace: 1, span: 2, start: 105, end: 155, name: "handle /hog"},
	))
	got := h.received()
	server, handler := got[spanID(1)], got[spanID(2)]
	assert.InDelta(t, 20.0, attrDouble(t, server, AttrCPUSpanMs), 1e-9)
	assert.InDelta(t, 70.0, attrDouble(t, server, AttrCPUTraceMs), 1e-9)
	assert.Less(t, attrDouble(t, server, AttrCPUSpanMs), attrDouble(t, server, AttrCPUTraceMs))
	assert.InDelta(t, 50.0, attrDouble(t, handler, AttrCPUSpanMs), 1e-9)
	assert.InDelta(t, 50.0, attrDouble(t, handler, AttrCPUTraceMs), 1e-9)
	assert.Zero(t, attrDouble(t, server, AttrCPUOtherTracesMs))
	// The trace's hottest frame is the handler's: top_frames is of the samples in cpu.trace_ms.
	assert.Equal(t, []string{"hogCPU (service.js:27) 71%", "route (service.js:70) 29%"}, eventStrings(profileEvent(t, server), EventTopFrames))
}

// held_by: the other traces that held the thread, longest first; one that held it for under 1 %
// of the span is left out (exactly 1 % is kept), and at most top_frames of them are named.
func TestHeldByCutoffAndOrder(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	st := func(name string) int32 { return r.stack(js(name, "/srv/app/service.js", 9)) }
	// The span: 100-900 ms, 800 ms, so its 1 % is 8 ms.
	w.cpuEvery(on{tid: mainTID, trace: 2, span: 2, route: "/b", stack: st("b")}, 110, 200)     // 10 samples: 100 ms
	w.cpuEvery(on{tid: mainTID, trace: 3, span: 3, route: "/a", stack: st("a")}, 210, 500)     // 30 samples: 300 ms
	w.cpuAt(on{tid: mainTID, trace: 4, span: 4, route: "/c", stack: st("c")}, 510)             // 1 sample: 10 ms
	w.offCPU(on{tid: mainTID, trace: 5, span: 5, route: "/edge", stack: st("edge")}, 600, 608) // 8 ms: exactly 1 %
	w.offCPU(on{tid: mainTID, trace: 6, span: 6, route: "/under", stack: st("under")}, 620, 627.9)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 900, name: "GET /wait", route: "/wait", server: true}))
	s := h.received()[spanID(1)]
	assert.Equal(t, []string{
		"/a 03030303030303030303030303030303 300.0ms: a (service.js:9)",
		"/b 02020202020202020202020202020202 100.0ms: b (service.js:9)",
		"/c 04040404040404040404040404040404 10.0ms: c (service.js:9)",
		"/edge 05050505050505050505050505050505 8.0ms: edge (service.js:9)",
	}, eventStrings(profileEvent(t, s), EventHeldBy))
	// What the left-out trace held is still in the span's figures, and in held_by's remainder.
	assert.InDelta(t, 8.0+7.9, attrDouble(t, s, AttrOffCPUOtherTracesMs), 1e-6)
	ev := profileEvent(t, s)
	others, _ := ev.Get(EventHeldByOthers)
	othersMs, _ := ev.Get(EventHeldByOthersMs)
	assert.Equal(t, int64(1), others.Int())
	assert.InDelta(t, 7.9, othersMs.Double(), 1e-6)
}

// held_by names at most top_frames traces, the longest; the others are its remainder.
func TestHeldByKeepsTheLongest(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TopFrames = 2 })
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	// Traces 2..6 hold the thread for 10, 20, ... 50 ms, in that order in time.
	at := 110.0
	for i := byte(2); i <= 6; i++ {
		n := float64(i - 1)
		w.cpuEvery(on{tid: mainTID, trace: i, span: i, route: fmt.Sprintf("/r%d", i), stack: r.stack(js("f", "/a.js", 1))}, at, at+10*(n-1))
		at += 10*n + 5
	}
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 400, name: "GET /wait", server: true}))
	ev := profileEvent(t, h.received()[spanID(1)])
	assert.Equal(t, []string{
		"/r6 06060606060606060606060606060606 50.0ms: f (a.js:1)",
		"/r5 05050505050505050505050505050505 40.0ms: f (a.js:1)",
	}, eventStrings(ev, EventHeldBy))
	// The three shorter ones are the remainder: 10 + 20 + 30 ms.
	others, _ := ev.Get(EventHeldByOthers)
	othersMs, _ := ev.Get(EventHeldByOthersMs)
	assert.Equal(t, int64(3), others.Int())
	assert.InDelta(t, 60.0, othersMs.Double(), 1e-6)
}
