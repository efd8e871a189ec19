// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// Past max_pending_spans a batch is sent on at once, what cannot be enriched yet unenriched.
func TestMaxPendingSpans(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxPendingSpans = 3 })
	h.sendTraces(traces(service(1), spanSpec{trace: 1, span: 1, start: 1, end: 2}, spanSpec{trace: 1, span: 2, start: 1, end: 2}))
	assert.Zero(t, h.sink.SpanCount())
	h.sendTraces(traces(service(1), spanSpec{trace: 2, span: 3, start: 1, end: 2}, spanSpec{trace: 2, span: 4, start: 1, end: 2}))
	assert.Equal(t, 2, h.sink.SpanCount())
	assert.Equal(t, int64(2), h.spans(spanOverPendingBound))
	assert.Equal(t, int64(2), h.c.tel.pendingSpans.Load())
}

// Past max_samples the oldest windows go, and a window larger than the bound keeps what fits.
func TestMaxSamples(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxSamples = 25 })
	send := func(pid int64, n int) {
		r := newRequest()
		w := r.window(agentProcess(pid), 0, 1000)
		st := r.stack(native("a"))
		for i := 0; i < n; i++ {
			w.cpuAt(on{tid: pid, stack: st}, float64(i))
		}
		h.sendProfiles(r)
	}
	send(1, 10)
	send(2, 10)
	send(3, 10)
	assert.Equal(t, 20, h.c.store.Held())
	assert.Equal(t, int64(1), h.windows(profilestore.WindowEvicted))
	assert.Equal(t, int64(10), h.samples(profilestore.SampleEvictedOnDrop))
	send(4, 40)
	assert.Equal(t, 25, h.c.store.Held())
	assert.Equal(t, int64(15), h.samples(profilestore.SampleOverBound))
	assert.Equal(t, 1, h.c.store.Processes())
}

// Past max_processes the process whose newest window is oldest is forgotten.
func TestMaxProcesses(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxProcesses = 2 })
	for pid := int64(1); pid <= 3; pid++ {
		r := newRequest()
		r.window(agentProcess(pid), 0, 1000).cpuAt(on{tid: pid, stack: r.stack(native("a"))}, 5)
		h.sendProfiles(r)
		h.advance(time.Second)
	}
	assert.Equal(t, 2, h.c.store.Processes())
	assert.False(t, h.c.store.HoldsProcess("node-1", 1), "the first process is forgotten")
	assert.Equal(t, int64(1), h.windows(profilestore.WindowEvicted))
	assert.Equal(t, 2, h.c.store.PIDsIndexed())
}

// Windows go after `retention`.
func TestRetention(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	r.window(agentProcess(mainTID), 0, 1000).cpuAt(on{tid: mainTID, stack: r.stack(native("a"))}, 5)
	h.sendProfiles(r)
	h.advance(h.c.cfg.Retention)
	assert.Equal(t, 1, h.c.store.Processes(), "kept for exactly retention")
	h.advance(time.Second)
	assert.Zero(t, h.c.store.Processes())
	assert.Zero(t, h.c.store.Held())
	assert.Equal(t, int64(1), h.windows(profilestore.WindowExpired))
}

// top_frames bounds each list of the event.
func TestTopFramesBound(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TopFrames = 2 })
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	for i := 0; i < 3; i++ {
		st := r.stack(js(fmt.Sprintf("f%d", i), "/a.js", int64(i+1)))
		w.cpuEvery(on{tid: mainTID, trace: 1, span: 1, stack: st}, 100+float64(i)*30, 100+float64(i)*30+float64(2-i)*10)
		w.cpuAt(on{tid: mainTID, trace: byte(10 + i), span: 10, route: "/r", stack: st}, 195+float64(i))
	}
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 200}))
	ev := profileEvent(t, h.received()[spanID(1)])
	assert.Equal(t, []string{"f0 (a.js:1) 50%", "f1 (a.js:2) 33%"}, eventStrings(ev, EventTopFrames))
	assert.Len(t, eventStrings(ev, EventHeldBy), 2)
}

// The names of traces for held_by are bounded: the oldest is forgotten first; and so are a
// trace's requests and calls kept for its path.
func TestTraceNamesBound(t *testing.T) {
	n := newTraceNames(2)
	for i := byte(1); i <= 3; i++ {
		n.entry(traceID(i)).put(1, fmt.Sprint(i), rankRequest)
	}
	assert.Empty(t, n.get(traceID(1), 1))
	assert.Equal(t, "3", n.get(traceID(3), 1))
	assert.Len(t, n.traces, 2)

	td := traces(service(mainTID))
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < 2*maxTraceHops; i++ {
		for _, kind := range []ptrace.SpanKind{ptrace.SpanKindServer, ptrace.SpanKindClient} {
			s := spans.AppendEmpty()
			s.SetTraceID(traceID(9))
			s.SetSpanID(pcommon.SpanID{byte(kind), byte(i)})
			s.SetKind(kind)
			s.SetStartTimestamp(pcommon.Timestamp(ms(1)))
			s.SetEndTimestamp(pcommon.Timestamp(ms(2)))
		}
	}
	n.note(td.ResourceSpans().At(0))
	assert.Len(t, n.traces[traceID(9)].servers, maxTraceHops)
	assert.Len(t, n.traces[traceID(9)].calls, maxTraceHops)
}

// Resources remembered as unprofiled are bounded.
func TestUnprofiledBound(t *testing.T) {
	h := newHarness(t, nil)
	for pid := int64(1); pid <= unprofiledBound+10; pid++ {
		h.sendTraces(traces(service(pid), spanSpec{trace: 1, span: 1, start: 1, end: 2}))
	}
	h.advance(h.c.cfg.MaxWait)
	require.LessOrEqual(t, len(h.c.unprofiled), unprofiledBound)
	assert.Equal(t, int64(unprofiledBound+10), h.spans(spanNoProcess))
}
