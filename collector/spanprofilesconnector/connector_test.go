// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/metadata"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

func enriched(h *harness, id byte) bool {
	s, ok := h.received()[spanID(id)]
	if !ok {
		return false
	}
	_, has := s.Attributes().Get(AttrSamples)
	return has
}

// A span that arrives before the window that covers it waits for it, and leaves enriched when
// it comes.
func TestSpanWaitsForItsWindow(t *testing.T) {
	h := newHarness(t, nil)
	first := newRequest()
	first.window(agentProcess(mainTID), 0, 1000).cpuAt(on{tid: mainTID, stack: first.stack(native("a"))}, 500)
	h.sendProfiles(first)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 1500, end: 1560}))
	assert.Zero(t, h.sink.SpanCount(), "held until the window of 1000-2000 ms arrives")
	assert.Equal(t, int64(1), h.c.tel.pendingSpans.Load())

	h.advance(5 * time.Second)
	late := newRequest()
	late.window(agentProcess(mainTID), 1000, 2000).cpuEvery(on{tid: mainTID, trace: 1, span: 1, stack: late.stack(js("f", "/a.js", 3))}, 1510, 1540)
	h.sendProfiles(late)
	require.Equal(t, 1, h.sink.SpanCount())
	assert.InDelta(t, 40.0, attrDouble(t, h.received()[spanID(1)], AttrCPUSpanMs), 1e-9)
	assert.Equal(t, int64(0), h.c.tel.pendingSpans.Load())
}

// Windows out of order: the window after the span arrives before the span's own; the span
// neither takes the later window's (empty) view for the answer nor waits forever.
func TestWindowsOutOfOrder(t *testing.T) {
	h := newHarness(t, nil)
	stack := func(r *request) int32 { return r.stack(js("f", "/a.js", 3)) }
	w2 := newRequest()
	w2.window(agentProcess(mainTID), 2000, 3000).cpuAt(on{tid: mainTID, stack: stack(w2)}, 2500)
	h.sendProfiles(w2)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 1500, end: 1560}))
	assert.Zero(t, h.sink.SpanCount(), "its window is still to come")

	w1 := newRequest()
	w1.window(agentProcess(mainTID), 1000, 2000).cpuEvery(on{tid: mainTID, trace: 1, span: 1, stack: stack(w1)}, 1500, 1550)
	h.sendProfiles(w1)
	require.True(t, enriched(h, 1))
	assert.InDelta(t, 60.0, attrDouble(t, h.received()[spanID(1)], AttrCPUSpanMs), 1e-9)
}

// A gap between windows inside a span (300 ms of its 1.2 s): the span waits for the missing
// window; when it never comes (the agent sends no window for a process without samples), the
// span leaves at max_wait, enriched with the gap counted as no samples, and counted.
func TestGapBetweenWindows(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	st := r.stack(js("f", "/a.js", 3))
	r.window(agentProcess(mainTID), 0, 1000).cpuAt(on{tid: mainTID, stack: st}, 950)
	r.window(agentProcess(mainTID), 1300, 3000).cpuAt(on{tid: mainTID, stack: st}, 2050)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 900, end: 2100}))
	assert.Zero(t, h.sink.SpanCount())
	h.advance(h.c.cfg.MaxWait - time.Second)
	assert.Zero(t, h.sink.SpanCount(), "still within max_wait")
	h.advance(time.Second)
	require.True(t, enriched(h, 1))
	assert.InDelta(t, 20.0, attrDouble(t, h.received()[spanID(1)], AttrCPUNoSpanMs), 1e-9)
	assert.Equal(t, int64(1), h.count("otelcol_connector_spanprofiles_spans_with_gaps", ""))
}

// A gap over most of a span (the agent stopped and came back) passes it unenriched: zeros
// would say the thread did nothing.
func TestGapOverMostOfASpan(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	st := r.stack(js("f", "/a.js", 3))
	r.window(agentProcess(mainTID), 0, 1000).cpuAt(on{tid: mainTID, stack: st}, 950)
	r.window(agentProcess(mainTID), 5000, 6000).cpuAt(on{tid: mainTID, stack: st}, 5050)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 900, end: 5100}))
	h.advance(h.c.cfg.MaxWait)
	require.Equal(t, 1, h.sink.SpanCount())
	assert.False(t, enriched(h, 1))
	assert.Equal(t, int64(1), h.spans(spanNotCovered))
}

// A span of a process whose windows never reach its end passes unenriched at max_wait; a span
// older than every window held passes at once when those windows have been there max_wait.
func TestSpansNotCovered(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	r.window(agentProcess(mainTID), 1000, 2000).cpuAt(on{tid: mainTID, stack: r.stack(native("a"))}, 1500)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 2500, end: 2600}))
	h.advance(h.c.cfg.MaxWait)
	require.Equal(t, 1, h.sink.SpanCount())
	assert.False(t, enriched(h, 1))
	assert.Equal(t, int64(1), h.spans(spanNotCovered))

	h.sendTraces(traces(service(mainTID), spanSpec{trace: 2, span: 2, start: 100, end: 200}))
	assert.Equal(t, 2, h.sink.SpanCount(), "before the earliest window, which has been held for max_wait")
	assert.Equal(t, int64(2), h.spans(spanNotCovered))
}

// Spans of a service the agent does not profile wait max_wait once; then that resource's spans
// pass at once, until a profile of its process arrives.
func TestUnprofiledServiceWaitsOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.sendTraces(traces(service(77), spanSpec{trace: 1, span: 1, start: 100, end: 200}))
	assert.Zero(t, h.sink.SpanCount())
	h.advance(h.c.cfg.MaxWait)
	assert.Equal(t, 1, h.sink.SpanCount())
	h.sendTraces(traces(service(77), spanSpec{trace: 2, span: 2, start: 300, end: 400}))
	assert.Equal(t, 2, h.sink.SpanCount(), "passed at once")
	assert.Equal(t, int64(2), h.spans(spanNoProcess))

	r := newRequest()
	r.window(agentProcess(77), 0, 1000).cpuAt(on{tid: 77, stack: r.stack(native("a"))}, 550)
	h.sendProfiles(r)
	h.sendTraces(traces(service(77), spanSpec{trace: 3, span: 3, start: 500, end: 600}))
	assert.True(t, enriched(h, 3), "profiled now")
}

// The same span twice (an SDK or a Collector that retried an export) is enriched the same way
// twice; a span a Collector before this one enriched passes as it is.
func TestDuplicateSpans(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	r.window(agentProcess(mainTID), 0, 1000).cpuEvery(on{tid: mainTID, trace: 1, span: 1, stack: r.stack(js("f", "/a.js", 3))}, 100, 130)
	h.sendProfiles(r)
	spec := spanSpec{trace: 1, span: 1, start: 100, end: 160}
	h.sendTraces(traces(service(mainTID), spec, spec))
	h.sendTraces(traces(service(mainTID), spec))
	require.Equal(t, 3, h.sink.SpanCount())
	for _, td := range h.sink.AllTraces() {
		forEachSpan(td, func(s ptrace.Span) {
			assert.InDelta(t, 40.0, attrDouble(t, s, AttrCPUSpanMs), 1e-9)
			assert.Equal(t, 1, s.Events().Len())
		})
	}
	again := ptrace.NewTraces()
	h.sink.AllTraces()[1].CopyTo(again)
	h.sendTraces(again)
	assert.Equal(t, int64(1), h.spans(spanAlreadyEnriched))
	last := h.sink.AllTraces()[len(h.sink.AllTraces())-1]
	assert.Equal(t, 1, last.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Events().Len(), "not enriched twice")
}

// The same window twice (an agent that retried a request the Collector had taken) is counted
// once: figures are not doubled.
func TestDuplicateWindow(t *testing.T) {
	h := newHarness(t, nil)
	send := func() {
		r := newRequest()
		r.window(agentProcess(mainTID), 0, 1000).cpuEvery(on{tid: mainTID, trace: 1, span: 1, stack: r.stack(js("f", "/a.js", 3))}, 100, 130)
		h.sendProfiles(r)
	}
	send()
	send()
	assert.Equal(t, int64(1), h.windows(profilestore.WindowDuplicate))
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 160}))
	assert.InDelta(t, 40.0, attrDouble(t, h.received()[spanID(1)], AttrCPUSpanMs), 1e-9)
}

// Shutting down sends every waiting span on, unenriched and counted, and forgets the state.
func TestShutdownSendsWaitingSpansOn(t *testing.T) {
	sink := &consumertest.TracesSink{}
	tel := componenttest.NewTelemetry()
	set := connectortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	f := NewFactory()
	cfg := f.CreateDefaultConfig()
	tr, err := f.CreateTracesToTraces(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	pr, err := f.CreateProfilesToTraces(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, tr.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, pr.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, tr.ConsumeTraces(context.Background(), traces(service(5), spanSpec{trace: 1, span: 1, start: 1, end: 2})))
	require.Zero(t, sink.SpanCount())
	require.NoError(t, tr.Shutdown(context.Background()))
	require.Zero(t, sink.SpanCount(), "the profiles half still runs")
	require.NoError(t, pr.Shutdown(context.Background()))
	require.Equal(t, 1, sink.SpanCount())
	assert.Zero(t, shared.Len(), "a reloaded Collector starts afresh")
	// Shutting down what never started (another component failed to start) is harmless.
	tr2, err := f.CreateTracesToTraces(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, tr2.Shutdown(context.Background()))
	require.NoError(t, tr2.Shutdown(context.Background()))
}

// The Collector's own telemetry: what is held now.
func TestGauges(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	r.window(agentProcess(mainTID), 0, 1000).cpuEvery(on{tid: mainTID, stack: r.stack(native("a"))}, 0, 90)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 1500, end: 1600}))
	gauge := func(name string) int64 {
		m, err := h.tel.GetMetric(name)
		require.NoError(t, err)
		return m.Data.(metricdataGauge).DataPoints[0].Value
	}
	assert.Equal(t, int64(1), gauge("otelcol_connector_spanprofiles_pending_spans"))
	assert.Equal(t, int64(10), gauge("otelcol_connector_spanprofiles_held_samples"))
	assert.Equal(t, int64(1), gauge("otelcol_connector_spanprofiles_processes"))
	assert.Equal(t, int64(10), h.samples(profilestore.SampleKept))
	assert.Equal(t, int64(1), h.windows(profilestore.WindowKept))
}

// A span that ends just past its process's latest window waits for the next: the off-CPU
// interval that ends it is sent with that window (found in a live run: a span 84 ms past its
// window's end was joined with that window alone).
func TestSpanEndingPastTheLatestWindowWaits(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	st := r.stack(js("f", "/a.js", 3))
	r.window(agentProcess(mainTID), 0, 1000).offCPU(on{tid: mainTID, stack: st}, 960, 990)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 950, end: 1001}))
	assert.Zero(t, h.sink.SpanCount())
	next := newRequest()
	next.window(agentProcess(mainTID), 1000.5, 2000).offCPU(on{tid: mainTID, stack: next.stack(js("f", "/a.js", 3))}, 991, 1001)
	h.sendProfiles(next)
	require.True(t, enriched(h, 1))
	assert.InDelta(t, 40.0, attrDouble(t, h.received()[spanID(1)], AttrOffCPUNoSpanMs), 1e-6)
}
