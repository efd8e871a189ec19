// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// withThread sets the thread.id the package writes on every span at its start.
func withThread(td ptrace.Traces, tids map[byte]int64) ptrace.Traces {
	forEachSpan(td, func(s ptrace.Span) {
		if tid, ok := tids[s.SpanID()[0]]; ok {
			s.Attributes().PutInt("thread.id", tid)
		}
	})
	return td
}

func threadOfSpan(t *testing.T, s ptrace.Span) (int64, string) {
	t.Helper()
	ev := profileEvent(t, s)
	tid, _ := ev.Get(EventThreadID)
	src, _ := ev.Get(EventThreadSource)
	return tid.Int(), src.Str()
}

// A /report server span on the main thread whose trace renders in a worker: the worker's
// samples are the trace's, so without the span's own thread the server span was measured on
// the worker (the trace's thread). With thread.id each is measured on its own thread: the server
// span sees the main loop held by another request, the worker's span its rendering.
func TestEachSpanOnTheThreadItSays(t *testing.T) {
	const worker = mainTID + 5
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	render := r.stack(js("renderReport", "/srv/app/report-worker.js", 12))
	hog := r.stack(js("computePrice", "/srv/app/price.js", 13))
	// 100-200 ms: /report; its worker renders 110-190; the main loop runs a /price request.
	w.cpuEvery(on{tid: worker, trace: 1, span: 2, stack: render}, 110, 190)
	w.cpuEvery(on{tid: mainTID, trace: 3, span: 3, route: "/price/:sku", stack: hog}, 120, 160)
	h.sendProfiles(r)
	h.sendTraces(withThread(traces(service(mainTID),
		spanSpec{trace: 1, span: 1, start: 100, end: 200, name: "GET", server: true},
		spanSpec{trace: 1, span: 2, start: 105, end: 195, name: "render report"},
	), map[byte]int64{1: mainTID, 2: worker}))
	got := h.received()
	server, render2 := got[spanID(1)], got[spanID(2)]
	tid, src := threadOfSpan(t, server)
	assert.Equal(t, int64(mainTID), tid)
	assert.Equal(t, profilestore.ThreadFromAttribute, src)
	assert.InDelta(t, 50.0, attrDouble(t, server, AttrCPUOtherTracesMs), 1e-9)
	assert.Zero(t, attrDouble(t, server, AttrCPUTraceMs), "the worker's rendering is not the main thread's")
	tid, src = threadOfSpan(t, render2)
	assert.Equal(t, int64(worker), tid)
	assert.Equal(t, profilestore.ThreadFromAttribute, src)
	assert.InDelta(t, 90.0, attrDouble(t, render2, AttrCPUSpanMs), 1e-9)
}

// In a PID namespace of its own a process knows its threads by other ids than the host: its
// main thread is its pid (the agent's process.vpid, and its spans' process.pid), a worker is
// mapped through the agent's thread.vid. Another profiler sends no thread.vid: a worker's id is
// then not guessed, the span's samples decide.
func TestThreadIDsInAPIDNamespace(t *testing.T) {
	const hostPID, worker = 70001, 70007
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(hostPID, "process.vpid", int64(1), "service.instance.id", "i-ns"), 0, 1000)
	st := r.stack(js("work", "/a.js", 1))
	w.cpuEvery(on{tid: hostPID, trace: 1, span: 1, stack: st}, 100, 140)
	// The worker's sample carries its namespace id (7) beside the host's.
	s := w.cpu.Samples().AppendEmpty()
	s.SetStackIndex(st)
	s.SetLinkIndex(r.link(2, 2))
	s.AttributeIndices().Append(r.attr("thread.id", int64(worker)), r.attr("thread.vid", int64(7)))
	s.Values().FromRaw([]int64{1})
	s.TimestampsUnixNano().FromRaw([]uint64{uint64(ms(150))})
	h.sendProfiles(r)
	h.sendTraces(withThread(traces(service(1, "service.instance.id", "i-ns"),
		spanSpec{trace: 1, span: 1, start: 100, end: 160, server: true},
		spanSpec{trace: 2, span: 2, start: 100, end: 160},
		spanSpec{trace: 2, span: 3, start: 100, end: 160},
	), map[byte]int64{1: 1, 2: 7, 3: 9}))
	got := h.received()
	tid, src := threadOfSpan(t, got[spanID(1)])
	assert.Equal(t, [2]any{int64(hostPID), profilestore.ThreadFromAttribute}, [2]any{tid, src}, "the main thread: its pid")
	tid, src = threadOfSpan(t, got[spanID(2)])
	assert.Equal(t, [2]any{int64(worker), profilestore.ThreadFromAttribute}, [2]any{tid, src}, "a worker, through thread.vid")
	tid, src = threadOfSpan(t, got[spanID(3)])
	assert.Equal(t, [2]any{int64(worker), profilestore.ThreadFromTrace}, [2]any{tid, src}, "an id nothing maps: the trace's samples decide")
}
