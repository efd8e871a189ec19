// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

const mainTID = 4242 // the service's host pid: its main thread's tid

// A /wait span that waited behind a /hog request on the event loop: the hog's CPU is the
// span's other_traces_ms and held_by names it, its own CPU and the idle loop are told apart.
func TestWaitBehindAnotherRequest(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	hog := r.stack(native("v8::internal::Runtime"), js("hog", "/srv/app/service.js", 12), js("handle", "/srv/app/service.js", 30))
	waitCode := r.stack(js("respond", "/srv/app/service.js", 40))
	loop := r.stack(native("epoll_wait"), native("uv_run"))
	// 100-160 ms: the wait span. 100-105 its own code, 110-150 the hog (5 samples at 100 Hz),
	// 150-155 idle, 155-160 its own code again.
	w.cpuAt(on{tid: mainTID, trace: 1, span: 1, route: "/wait", stack: waitCode}, 102)
	w.cpuEvery(on{tid: mainTID, trace: 2, span: 2, route: "/hog", stack: hog}, 110, 150)
	w.offCPU(on{tid: mainTID, stack: loop}, 151, 155)
	w.cpuAt(on{tid: mainTID, trace: 1, span: 1, route: "/wait", stack: waitCode}, 157)
	// Another thread's samples are not the span's.
	w.cpuEvery(on{tid: mainTID + 1, trace: 3, span: 3, stack: hog}, 100, 160)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 160, name: "GET /wait", route: "/wait", server: true}))

	s := h.received()[spanID(1)]
	assert.InDelta(t, 20.0, attrDouble(t, s, AttrCPUSpanMs), 1e-9)
	assert.InDelta(t, 20.0, attrDouble(t, s, AttrCPUTraceMs), 1e-9)
	assert.InDelta(t, 50.0, attrDouble(t, s, AttrCPUOtherTracesMs), 1e-9)
	assert.InDelta(t, 0.0, attrDouble(t, s, AttrCPUNoSpanMs), 1e-9)
	assert.InDelta(t, 4.0, attrDouble(t, s, AttrOffCPUNoSpanMs), 1e-9)
	assert.Equal(t, int64(7), attrInt(t, s, AttrSamples))
	ev := profileEvent(t, s)
	assert.Equal(t, []string{"/hog 02020202020202020202020202020202 50.0ms: hog (service.js:12)"}, eventStrings(ev, EventHeldBy))
	assert.Equal(t, []string{"respond (service.js:40) 100%"}, eventStrings(ev, EventTopFrames))
	tid, _ := ev.Get(EventThreadID)
	src, _ := ev.Get(EventThreadSource)
	assert.Equal(t, int64(mainTID), tid.Int())
	assert.Equal(t, profilestore.ThreadFromSpan, src.Str())
	period, _ := ev.Get(EventCPUPeriodMs)
	assert.InDelta(t, 10.0, period.Double(), 1e-9)
	assert.Equal(t, int64(1), h.spans(spanEnriched))
}

// A route that blocks the thread inside its span gets its time in off_cpu.trace_ms; a span it
// delays gets it in off_cpu.other_traces_ms, and held_by names the blocker by its frame.
func TestBlockingIsOffCPUOfItsTraceAndOtherTracesOfWhatItDelays(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	block := r.stack(native("futex_wait"), js("blockFor", "/srv/app/service.js", 55))
	w.offCPU(on{tid: mainTID, trace: 5, span: 5, route: "/block", stack: block}, 200, 230)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID),
		spanSpec{trace: 5, span: 5, start: 199, end: 231, name: "GET /block", server: true},
		spanSpec{trace: 6, span: 6, start: 190, end: 240, name: "GET /wait", server: true},
	))
	got := h.received()
	assert.InDelta(t, 30.0, attrDouble(t, got[spanID(5)], AttrOffCPUTraceMs), 1e-9)
	assert.InDelta(t, 0.0, attrDouble(t, got[spanID(5)], AttrOffCPUOtherTracesMs), 1e-9)
	assert.InDelta(t, 30.0, attrDouble(t, got[spanID(6)], AttrOffCPUOtherTracesMs), 1e-9)
	assert.Equal(t, []string{"/block 05050505050505050505050505050505 30.0ms: blockFor (service.js:55)"},
		eventStrings(profileEvent(t, got[spanID(6)]), EventHeldBy))
}

// Samples exactly at a span's start and end are the span's, one ns outside are not; off-CPU
// intervals are cut at its edges.
func TestClockEdges(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	st := r.stack(js("work", "/a.js", 1))
	w.cpuAt(on{tid: mainTID, stack: st}, 100, 200)                    // on both edges
	w.cpuAt(on{tid: mainTID, stack: st}, 100-1e-6, 200+1e-6)          // 1 ns outside each
	w.offCPU(on{tid: mainTID, stack: st}, 90, 110)                    // 10 ms inside
	w.offCPU(on{tid: mainTID, stack: st}, 190, 250)                   // 10 ms inside
	w.offCPU(on{tid: mainTID, stack: st}, 80, 100)                    // ends at the start: none
	w.offCPU(on{tid: mainTID, trace: 9, span: 9, stack: st}, 50, 300) // covers the whole span
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 200}))
	s := h.received()[spanID(1)]
	assert.Equal(t, int64(2), attrInt(t, s, AttrSamples))
	assert.InDelta(t, 20.0, attrDouble(t, s, AttrCPUNoSpanMs), 1e-9)
	assert.InDelta(t, 20.0, attrDouble(t, s, AttrOffCPUNoSpanMs), 1e-6)
	assert.InDelta(t, 100.0, attrDouble(t, s, AttrOffCPUOtherTracesMs), 1e-6)
}

// A span covered by its process's windows whose thread the sampler saw (a sample before it) but
// that has no sample inside it is enriched with zeros: measured, and thread_ctx.samples says
// how much that is worth; the main thread is a guess and says so. A span whose thread had no
// sample at all in the windows gets no figure: zeros would be an answer nothing supports.
func TestSpanWithoutSamples(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	w.cpuAt(on{tid: mainTID + 7, stack: r.stack(native("gc"))}, 500)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 102}))
	s := h.received()[spanID(1)]
	assert.Zero(t, s.Attributes().Len(), "no figure: its thread was never sampled")
	assert.Zero(t, s.Events().Len())
	assert.Equal(t, int64(1), h.spans(spanNoThreadSamples))

	r = newRequest()
	r.window(agentProcess(mainTID), 1000, 2000).cpuAt(on{tid: mainTID, stack: r.stack(native("uv_run"))}, 1500)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 2, span: 2, start: 1100, end: 1102}))
	s = h.received()[spanID(2)]
	assert.Equal(t, int64(0), attrInt(t, s, AttrSamples))
	for _, k := range []string{AttrCPUSpanMs, AttrCPUTraceMs, AttrCPUOtherTracesMs, AttrCPUNoSpanMs, AttrOffCPUTraceMs, AttrOffCPUOtherTracesMs, AttrOffCPUNoSpanMs} {
		assert.Zero(t, attrDouble(t, s, k), k)
	}
	assert.Zero(t, attrInt(t, s, AttrAllocBytes))
	ev := profileEvent(t, s)
	src, _ := ev.Get(EventThreadSource)
	assert.Equal(t, profilestore.ThreadGuessMain, src.Str())
	assert.Nil(t, eventStrings(ev, EventTopFrames))
	assert.Nil(t, eventStrings(ev, EventHeldBy))
	assert.Equal(t, int64(1), h.spans(spanEnriched))
}

// Worker threads: a span is joined with the thread its own samples ran on; a span without
// samples of its own with the thread its trace's samples ran on.
func TestWorkerThreads(t *testing.T) {
	const worker = mainTID + 3
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	compute := r.stack(js("compute", "/srv/app/worker.js", 8))
	w.cpuEvery(on{tid: worker, trace: 1, span: 2, stack: compute}, 100, 140)
	w.cpuEvery(on{tid: mainTID, trace: 4, span: 4, stack: compute}, 100, 140) // the main thread is busy with another request
	w.offCPU(on{tid: worker}, 141, 150)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID),
		spanSpec{trace: 1, span: 2, start: 100, end: 150}, // the worker's span
		spanSpec{trace: 1, span: 3, start: 141, end: 149}, // a span of the same trace without samples
	))
	got := h.received()
	s := got[spanID(2)]
	assert.InDelta(t, 50.0, attrDouble(t, s, AttrCPUSpanMs), 1e-9)
	assert.Zero(t, attrDouble(t, s, AttrCPUOtherTracesMs))
	tid, _ := profileEvent(t, s).Get(EventThreadID)
	assert.Equal(t, int64(worker), tid.Int())
	s3 := got[spanID(3)]
	tid, _ = profileEvent(t, s3).Get(EventThreadID)
	src, _ := profileEvent(t, s3).Get(EventThreadSource)
	assert.Equal(t, int64(worker), tid.Int())
	assert.Equal(t, profilestore.ThreadFromTrace, src.Str())
	assert.InDelta(t, 8.0, attrDouble(t, s3, AttrOffCPUNoSpanMs), 1e-9)
}

// One pid in two containers: the container tells them apart; a span that says neither its
// container nor its instance is not guessed between them.
func TestOnePidInTwoContainers(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	st := r.stack(js("work", "/a.js", 1))
	r.window(agentProcess(9001, "process.vpid", int64(7), "container.id", "aaa"), 0, 1000).cpuEvery(on{tid: 9001, stack: st}, 100, 120)
	r.window(agentProcess(9002, "process.vpid", int64(7), "container.id", "bbb"), 0, 1000).cpuEvery(on{tid: 9002, stack: st}, 100, 150)
	h.sendProfiles(r)
	// A process sees its own pid as its main thread's tid: 7 here, 9001 / 9002 to the agent.
	h.sendTraces(traces(service(7, "container.id", "aaa"), spanSpec{trace: 1, span: 1, start: 100, end: 160}))
	h.sendTraces(traces(service(7, "container.id", "bbb"), spanSpec{trace: 2, span: 2, start: 100, end: 160}))
	h.sendTraces(traces(service(7), spanSpec{trace: 3, span: 3, start: 100, end: 160}))
	// Nothing tells it: it waits for evidence (samples of its trace) until max_wait.
	h.advance(h.c.cfg.MaxWait)
	got := h.received()
	assert.InDelta(t, 30.0, attrDouble(t, got[spanID(1)], AttrCPUNoSpanMs), 1e-9)
	assert.InDelta(t, 60.0, attrDouble(t, got[spanID(2)], AttrCPUNoSpanMs), 1e-9)
	_, enriched := got[spanID(3)].Attributes().Get(AttrSamples)
	assert.False(t, enriched, "two processes fit: passed on as it came")
	assert.Equal(t, int64(1), h.spans(spanAmbiguousProcess))
}

// service.instance.id decides first: the same instance whatever pid the span says (a process
// that forked and kept its SDK's resource); a wrong instance id never matches by pid.
func TestServiceInstanceIDFirst(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	st := r.stack(js("work", "/a.js", 1))
	r.window(agentProcess(mainTID, "service.instance.id", "i-1"), 0, 1000).cpuEvery(on{tid: mainTID, stack: st}, 100, 120)
	h.sendProfiles(r)
	h.sendTraces(traces(service(1, "service.instance.id", "i-1"), spanSpec{trace: 1, span: 1, start: 100, end: 160}))
	h.sendTraces(traces(service(mainTID, "service.instance.id", "i-2"), spanSpec{trace: 2, span: 2, start: 100, end: 160}))
	got := h.received()
	assert.InDelta(t, 30.0, attrDouble(t, got[spanID(1)], AttrCPUNoSpanMs), 1e-9)
	require.Len(t, got, 1, "the other waits for a process i-2")
	h.advance(h.c.cfg.MaxWait)
	_, enriched := h.received()[spanID(2)].Attributes().Get(AttrSamples)
	assert.False(t, enriched)
	assert.Equal(t, int64(1), h.spans(spanNoProcess))
}

// Allocations: the bytes of the span's trace on its thread, and where they were allocated.
func TestAllocations(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	buf := r.stack(native("Heap::Allocate"), js("buildReport", "/srv/app/service.js", 70))
	other := r.stack(js("parse", "/srv/app/service.js", 80))
	w.allocAt(on{tid: mainTID, trace: 1, span: 1, stack: buf}, 110, 3<<20)
	w.allocAt(on{tid: mainTID, trace: 1, span: 8, stack: other}, 120, 1<<20) // a child span of the trace
	w.allocAt(on{tid: mainTID, trace: 2, span: 2, stack: buf}, 130, 5<<20)   // another request's
	w.cpuAt(on{tid: mainTID, trace: 1, span: 1, stack: buf}, 111)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 160}))
	s := h.received()[spanID(1)]
	assert.Equal(t, int64(4<<20), attrInt(t, s, AttrAllocBytes))
	assert.Equal(t, []string{"buildReport (service.js:70) 75%", "parse (service.js:80) 25%"}, eventStrings(profileEvent(t, s), EventTopAllocFrames))
}

// Without off-CPU or allocation profiles (the agent without --off-cpu and --alloc), their
// fields are left out rather than reported as 0.
func TestFieldsOfProfilesNotSentAreLeftOut(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	w.cpuAt(on{tid: mainTID, stack: r.stack(native("uv_run"))}, 120)
	r.pd.ResourceProfiles().At(0).ScopeProfiles().At(0).Profiles().RemoveIf(func(p pprofile.Profile) bool {
		return r.dict.StringTable().At(int(p.SampleType().TypeStrindex())) != "samples"
	})
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 160}))
	s := h.received()[spanID(1)]
	assert.InDelta(t, 10.0, attrDouble(t, s, AttrCPUNoSpanMs), 1e-9)
	for _, k := range []string{AttrOffCPUTraceMs, AttrOffCPUOtherTracesMs, AttrOffCPUNoSpanMs, AttrAllocBytes} {
		_, ok := s.Attributes().Get(k)
		assert.False(t, ok, k)
	}
}

// A span whose start is a whole millisecond (OpenTelemetry JS: Date.now()) is placed half a
// millisecond later: its own sample 0.4 ms after its stated end is its own, a sample 0.2 ms
// after its stated start is not taken for one before it.
func TestMillisecondClockSpansAreShiftedHalfAMillisecond(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	st := r.stack(js("f", "/a.js", 1))
	w.cpuAt(on{tid: mainTID, trace: 1, span: 1, stack: st}, 150.4, 100.6)
	w.cpuAt(on{tid: mainTID, stack: st}, 100.2)
	h.sendProfiles(r)
	td := traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 150})
	s := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	s.SetStartTimestamp(pcommon.Timestamp(1_760_000_000_100_000_000))
	s.SetEndTimestamp(pcommon.Timestamp(1_760_000_000_150_000_000))
	h.sendTraces(td)
	got := h.received()[spanID(1)]
	assert.InDelta(t, 20.0, attrDouble(t, got, AttrCPUSpanMs), 1e-9)
	assert.Zero(t, attrDouble(t, got, AttrCPUNoSpanMs))
}
