// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// Samples that lie about their time, or weigh what no sample can, are refused and counted; a
// span on their thread gets no figure they could have changed (a refused sample might have
// been inside it), a span on another thread is joined as if they had not come.
func TestLyingTimestampsAndHugeValues(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	st := r.stack(js("f", "/a.js", 1))
	at := on{tid: mainTID, stack: st}
	w.cpuAt(at, 120)                                                             // honest
	w.cpuAt(on{tid: mainTID + 1, trace: 2, span: 2, stack: st}, 120)             // honest, another thread
	w.sample(w.cpu, at, []int64{1}, []int64{ms(1000) + int64(time.Hour)})        // an hour after its window
	w.sample(w.cpu, at, []int64{1}, []int64{1})                                  // 1970
	w.sample(w.cpu, at, []int64{1 << 40}, []int64{ms(130)})                      // a trillion samples in one
	w.sample(w.cpu, at, []int64{-3}, []int64{ms(130)})                           // negative
	w.sample(w.off, at, []int64{int64(48 * time.Hour)}, []int64{ms(100)})        // off CPU for two days
	w.sample(w.off, at, []int64{int64(time.Second)}, []int64{ms(-5000)})         // ended long before its window
	w.sample(w.alloc, at, []int64{1 << 50}, []int64{ms(130)})                    // a petabyte
	w.sample(w.cpu, on{tid: mainTID, stack: 9999}, []int64{1}, []int64{ms(130)}) // no such stack
	h.sendProfiles(r)
	assert.Equal(t, int64(2), h.samples(profilestore.SampleKept))
	assert.Equal(t, int64(8), h.samples(profilestore.SampleInvalid))
	h.sendTraces(traces(service(mainTID),
		spanSpec{trace: 1, span: 1, start: 100, end: 160},
		spanSpec{trace: 2, span: 2, start: 100, end: 160},
	))
	got := h.received()
	for _, k := range []string{AttrCPUNoSpanMs, AttrSamples, AttrOffCPUNoSpanMs, AttrAllocBytes} {
		_, ok := got[spanID(1)].Attributes().Get(k)
		assert.False(t, ok, k)
	}
	other := got[spanID(2)]
	assert.InDelta(t, 10.0, attrDouble(t, other, AttrCPUSpanMs), 1e-9)
	assert.Zero(t, attrDouble(t, other, AttrOffCPUNoSpanMs))
	assert.Zero(t, attrInt(t, other, AttrAllocBytes))
	assert.Equal(t, int64(1), h.spans(spanSamplesRefused))
	assert.Equal(t, int64(1), h.spans(spanEnriched))
}

// Indices outside their tables, anywhere in a sample's chain, refuse the sample, never panic.
func TestIndicesOutOfTheirTables(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	good := r.stack(js("f", "/a.js", 1))
	at := on{tid: mainTID, stack: good}
	add := func(mutate func(pprofile.Sample)) {
		w.cpuAt(at, 120)
		mutate(w.cpu.Samples().At(w.cpu.Samples().Len() - 1))
	}
	add(func(s pprofile.Sample) { s.SetLinkIndex(1 << 30) })
	add(func(s pprofile.Sample) { s.SetLinkIndex(-1) })
	add(func(s pprofile.Sample) { s.SetStackIndex(-7) })
	add(func(s pprofile.Sample) { s.AttributeIndices().Append(1 << 30) })
	// A stack whose location, function and string indices point nowhere.
	bad := func(mutate func(d pprofile.ProfilesDictionary)) {
		st := r.dict.StackTable().AppendEmpty()
		loc := r.dict.LocationTable().AppendEmpty()
		fn := r.dict.FunctionTable().AppendEmpty()
		loc.Lines().AppendEmpty().SetFunctionIndex(int32(r.dict.FunctionTable().Len() - 1))
		st.LocationIndices().Append(int32(r.dict.LocationTable().Len() - 1))
		mutate(r.dict)
		_ = fn
		w.cpuAt(on{tid: mainTID, stack: int32(r.dict.StackTable().Len() - 1)}, 120)
	}
	bad(func(d pprofile.ProfilesDictionary) {
		d.StackTable().At(d.StackTable().Len() - 1).LocationIndices().Append(1 << 30)
	})
	bad(func(d pprofile.ProfilesDictionary) {
		d.LocationTable().At(d.LocationTable().Len() - 1).Lines().At(0).SetFunctionIndex(-2)
	})
	bad(func(d pprofile.ProfilesDictionary) {
		d.FunctionTable().At(d.FunctionTable().Len() - 1).SetNameStrindex(1 << 30)
	})
	bad(func(d pprofile.ProfilesDictionary) {
		d.LocationTable().At(d.LocationTable().Len() - 1).AttributeIndices().Append(-9)
	})
	// The sample type's string: an unknown type is not the join's.
	p := r.pd.ResourceProfiles().At(0).ScopeProfiles().At(0).Profiles().AppendEmpty()
	p.SampleType().SetTypeStrindex(1 << 30)
	p.Samples().AppendEmpty()
	require.NotPanics(t, func() { h.sendProfiles(r) })
	assert.Equal(t, int64(8), h.samples(profilestore.SampleInvalid))
	assert.Zero(t, h.samples(profilestore.SampleKept))
}

// Samples without a time per value (a window that kept no times), without a thread, or of a
// CPU profile without a sane period are refused and counted.
func TestSamplesTheJoinCannotPlace(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	st := r.stack(native("a"))
	w.sample(w.cpu, on{tid: mainTID, stack: st}, []int64{3}, nil)
	w.sample(w.cpu, on{tid: 0, stack: st}, []int64{1}, []int64{ms(5)})
	h.sendProfiles(r)
	assert.Equal(t, int64(1), h.samples(profilestore.SampleUntimed))
	assert.Equal(t, int64(1), h.samples(profilestore.SampleNoThread))

	r2 := newRequest()
	w2 := r2.window(agentProcess(mainTID), 1000, 2000)
	w2.cpuAt(on{tid: mainTID, stack: r2.stack(native("a"))}, 1500)
	w2.cpu.SetPeriod(0)
	h.sendProfiles(r2)
	assert.Equal(t, int64(1), h.samples(profilestore.SampleInvalid))
}

// Windows without a time, with a duration of years, or of a process without a pid are refused.
func TestInvalidWindows(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	r.window(agentProcess(mainTID), 0, 1000*3600*24*365*10).cpuAt(on{tid: mainTID, stack: r.stack(native("a"))}, 5)
	zero := r.window(agentProcess(mainTID+1), 0, 1000)
	for _, p := range []pprofile.Profile{zero.cpu, zero.off, zero.alloc, zero.objects} {
		p.SetTime(0)
	}
	zero.cpuAt(on{tid: mainTID, stack: r.stack(native("a"))}, 5)
	anonymous := map[string]any{"service.name": "x"}
	r.window(anonymous, 0, 1000).cpuAt(on{tid: 1, stack: r.stack(native("a"))}, 5)
	h.sendProfiles(r)
	assert.Equal(t, int64(3), h.windows(profilestore.WindowInvalid))
	assert.Equal(t, int64(3), h.samples(profilestore.SampleInvalid))
	assert.Zero(t, h.c.store.Processes())
}

// Spans whose times make no sense, or whose resource names no process, pass at once, counted.
func TestAbsurdSpansAndUnknownResources(t *testing.T) {
	h := newHarness(t, nil)
	h.sendTraces(traces(service(mainTID),
		spanSpec{trace: 1, span: 1, start: 200, end: 100},
		spanSpec{trace: 1, span: 2, start: 0, end: 1000 * 3600 * 24 * 365},
	))
	td := traces(service(mainTID), spanSpec{trace: 1, span: 3, start: 1, end: 2})
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetStartTimestamp(0)
	h.sendTraces(td)
	assert.Equal(t, int64(3), h.spans(spanInvalidTimes))
	h.sendTraces(traces(map[string]any{"service.name": "x"}, spanSpec{trace: 1, span: 4, start: 1, end: 2}))
	h.sendTraces(traces(map[string]any{"process.pid": "not a number"}, spanSpec{trace: 1, span: 5, start: 1, end: 2}))
	assert.Equal(t, int64(2), h.spans(spanNoProcessIdentity))
	assert.Equal(t, 5, h.sink.SpanCount())
}

// Names the target controls are cut; a span stays small whatever the profile says.
func TestLongNamesAreCut(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	long := strings.Repeat("é", 10_000)
	r.window(agentProcess(mainTID), 0, 1000).cpuAt(on{tid: mainTID, trace: 1, span: 1, route: long, stack: r.stack(js(long, "/a.js", 1))}, 120)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 160}))
	frames := eventStrings(profileEvent(t, h.received()[spanID(1)]), EventTopFrames)
	require.Len(t, frames, 1)
	assert.LessOrEqual(t, len(frames[0]), profiledict.MaxLabelBytes+10)
	assert.True(t, strings.HasPrefix(frames[0], "éé"), "cut on a character boundary")
}

// Memory stays bounded under a stream of windows far larger than max_samples: what is held
// never passes it, and every sample is accounted for.
func TestMemoryBoundedUnderFlood(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxSamples = 5_000; c.MaxProcesses = 8 })
	sent := 0
	for i := 0; i < 200; i++ {
		r := newRequest()
		pid := int64(1 + i%20)
		w := r.window(agentProcess(pid), float64(i)*1000, float64(i+1)*1000)
		st := r.stack(native("a"))
		times := make([]float64, 300)
		for k := range times {
			times[k] = float64(i)*1000 + float64(k)
		}
		w.cpuAt(on{tid: pid, trace: 1, span: 1, stack: st}, times...)
		sent += len(times)
		h.sendProfiles(r)
		require.LessOrEqual(t, h.c.store.Held(), 5_000)
		require.LessOrEqual(t, h.c.store.Processes(), 8)
	}
	assert.Equal(t, int64(sent), h.samples(profilestore.SampleKept)+h.samples(profilestore.SampleOverBound))
	assert.Equal(t, int64(h.c.store.Held()), h.samples(profilestore.SampleKept)-h.samples(profilestore.SampleEvictedOnDrop))
}

// A span reused by a liar: the same ids on a span of another process get that process's
// figures, not the first one's.
func TestSameIDsInTwoProcesses(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	st := r.stack(native("a"))
	r.window(agentProcess(1), 0, 1000).cpuEvery(on{tid: 1, trace: 1, span: 1, stack: st}, 100, 110)
	r.window(agentProcess(2), 0, 1000).cpuEvery(on{tid: 2, trace: 1, span: 1, stack: st}, 100, 140)
	h.sendProfiles(r)
	h.sendTraces(traces(service(2), spanSpec{trace: 1, span: 1, start: 100, end: 160}))
	assert.InDelta(t, 50.0, attrDouble(t, h.received()[spanID(1)], AttrCPUSpanMs), 1e-9)
}

// A process that sends spans as another service's instance (its service.instance.id copied
// from a trace backend, even with a trace id of the real service's, so that the real process's
// windows hold samples of it) is not joined to that instance's process: its spans pass
// unenriched, counted ambiguous_process and said once; the real service's spans keep theirs,
// untouched by the forged ones; the forger's own spans, under its own instance id, are its.
func TestForgedServiceInstanceID(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	st := r.stack(native("checkout"))
	r.window(agentProcess(101, "service.instance.id", "shop-1"), 0, 1000).cpuEvery(on{tid: 101, trace: 1, span: 1, stack: st}, 100, 150)
	r.window(agentProcess(202, "service.name", "intruder", "service.instance.id", "intruder-1"), 0, 1000).
		cpuEvery(on{tid: 202, trace: 2, span: 2, stack: r.stack(native("forge"))}, 100, 130)
	h.sendProfiles(r)

	forged := service(202, "service.instance.id", "shop-1") // the forger's real pid, the victim's instance
	h.sendTraces(traces(forged,
		spanSpec{trace: 1, span: 11, start: 100, end: 160}, // the real service's trace id, copied
		spanSpec{trace: 3, span: 13, start: 100, end: 160},
		spanSpec{trace: 2, span: 12, start: 100, end: 160})) // the forger's own trace: not its instance either
	h.sendTraces(traces(service(101, "service.instance.id", "shop-1"), spanSpec{trace: 1, span: 1, start: 100, end: 160}))
	h.sendTraces(traces(service(202, "service.name", "intruder", "service.instance.id", "intruder-1"), spanSpec{trace: 2, span: 2, start: 100, end: 160}))
	h.advance(h.c.cfg.MaxWait)

	got := h.received()
	for _, id := range []byte{11, 12, 13} {
		require.Contains(t, got, spanID(id))
		assert.False(t, isEnriched(got[spanID(id)]), "forged span %d passes unenriched", id)
		_, ok := got[spanID(id)].Attributes().Get(AttrCPUSpanMs)
		assert.False(t, ok, "forged span %d carries no figure", id)
	}
	assert.EqualValues(t, 3, h.spans(spanAmbiguousProcess), "the forged spans, counted ambiguous")
	assert.InDelta(t, 60.0, attrDouble(t, got[spanID(1)], AttrCPUSpanMs), 1e-9, "the real service's span: its own samples only")
	tid, _ := threadOfSpan(t, got[spanID(1)])
	assert.Equal(t, int64(101), tid)
	assert.InDelta(t, 40.0, attrDouble(t, got[spanID(2)], AttrCPUSpanMs), 1e-9, "the forger's own span, under its own instance id")
	logged := h.logs.FilterMessageSnippet("did not join these spans to the process whose service.instance.id they carry").All()
	require.Len(t, logged, 1, "said once for the forged resource")
	assert.Equal(t, "shop-1", logged[0].ContextMap()["service.instance.id"])
}
