// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.uber.org/zap"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// profilerPeriodNs is the OpenTelemetry eBPF profiler's period at its default 20 samples/s.
const profilerPeriodNs = int64(1e9 / 20)

// profilerWindow is one resource's profiles as the OpenTelemetry eBPF profiler's reporter
// (reporter/internal/pdata/generate.go, thread-context PR #1229) builds them: scope named after
// the profiler, a CPU profile `samples`/`count` with period type `cpu`/`nanoseconds` and period
// 1e9/samples-per-second, each sample a stack, attributes and a link with timestamps and no
// values; record attributes as `process.context.label.<key>`; `thread.name` (the comm),
// `thread.id` and `cpu.logical_number`; an off-CPU profile `off_cpu`/`nanoseconds` without a
// period, one value per timestamp, timed when the thread ran again.
type profilerWindow struct {
	r        *request
	cpu, off pprofile.Profile
}

// profilerResource is what the profiler puts on a resource: the process context it read
// (the SDK's resource as the package publishes it), then process.pid (the host's) and the
// executable.
func profilerResource(hostPID int64, extra ...any) map[string]any {
	m := map[string]any{
		"service.name": "shop", "service.instance.id": "5d4c6b0e-0000-4000-8000-000000000001", "host.name": "node-1",
		"process.pid": hostPID, "process.executable.path": "/usr/bin/node", "process.executable.name": "node",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func (r *request) profilerWindow(resource map[string]any, start, end float64) *profilerWindow {
	rp := r.pd.ResourceProfiles().AppendEmpty()
	if err := rp.Resource().Attributes().FromRaw(resource); err != nil {
		panic(err)
	}
	sp := rp.ScopeProfiles().AppendEmpty()
	sp.Scope().SetName("go.opentelemetry.io/ebpf-profiler")
	w := &profilerWindow{r: r}
	add := func(typ, unit string, period bool) pprofile.Profile {
		p := sp.Profiles().AppendEmpty()
		p.SampleType().SetTypeStrindex(r.str(typ))
		p.SampleType().SetUnitStrindex(r.str(unit))
		if period {
			p.PeriodType().SetTypeStrindex(r.str("cpu"))
			p.PeriodType().SetUnitStrindex(r.str("nanoseconds"))
			p.SetPeriod(profilerPeriodNs)
		}
		p.SetTime(pcommon.Timestamp(ms(start)))
		p.SetDurationNano(uint64(ms(end) - ms(start)))
		return p
	}
	w.cpu = add("samples", "count", true)
	w.off = add("off_cpu", "nanoseconds", false)
	return w
}

func (w *profilerWindow) sample(p pprofile.Profile, at on, values []int64, times ...float64) {
	s := p.Samples().AppendEmpty()
	s.SetStackIndex(at.stack)
	s.SetLinkIndex(w.r.link(at.trace, at.span))
	if at.route != "" {
		s.AttributeIndices().Append(w.r.attr("process.context.label.http.route", at.route))
	}
	s.AttributeIndices().Append(w.r.attr("thread.name", "node"))
	s.AttributeIndices().Append(w.r.attr("thread.id", at.tid))
	s.AttributeIndices().Append(w.r.attr("cpu.logical_number", int64(1)))
	s.Values().FromRaw(values)
	ts := make([]uint64, len(times))
	for i, t := range times {
		ts[i] = uint64(ms(t))
	}
	s.TimestampsUnixNano().FromRaw(ts)
}

// cpuAt adds one sample with a timestamp per time and no values.
func (w *profilerWindow) cpuAt(at on, times ...float64) *profilerWindow {
	w.sample(w.cpu, at, nil, times...)
	return w
}

// The eBPF profiler's CPU samples (timestamps, no values) count one per timestamp, each for one
// period; its labels name routes; its resource (the process context it read) finds the process.
// On the old contract every such sample was refused as untimed and the span got zeros.
func TestEBPFProfilerCPUSamplesCountOnePerTimestamp(t *testing.T) {
	const hostPID = 31337
	h := newHarness(t, nil)
	r := newRequest()
	w := r.profilerWindow(profilerResource(hostPID), 0, 5000)
	hog := r.stack(js("burnHog", "/srv/app/service.js", 21), js("handle", "/srv/app/service.js", 40))
	// 1000-1200 ms: a /wait span; a /hog request holds its thread for 4 samples (200 ms at 20 Hz).
	w.cpuAt(on{tid: hostPID, trace: 2, span: 2, route: "/hog", stack: hog}, 1010, 1060, 1110, 1160)
	w.cpuAt(on{tid: hostPID, trace: 1, span: 1, route: "/wait", stack: r.stack(js("respond", "/srv/app/service.js", 50))}, 1190)
	h.sendProfiles(r)
	// The service's spans say the pid it sees (1 in a container) and the instance id it published.
	h.sendTraces(traces(service(1, "service.instance.id", "5d4c6b0e-0000-4000-8000-000000000001"),
		spanSpec{trace: 1, span: 1, start: 1000, end: 1200, name: "GET", server: true},
		spanSpec{trace: 2, span: 2, start: 1005, end: 1170, name: "GET", server: true},
	))
	got := h.received()
	wait, hogSpan := got[spanID(1)], got[spanID(2)]
	assert.InDelta(t, 200.0, attrDouble(t, wait, AttrCPUOtherTracesMs), 1e-9)
	assert.InDelta(t, 50.0, attrDouble(t, wait, AttrCPUSpanMs), 1e-9)
	assert.Equal(t, int64(5), attrInt(t, wait, AttrSamples))
	assert.Equal(t, []string{"/hog 02020202020202020202020202020202 200.0ms: burnHog (service.js:21)"}, eventStrings(profileEvent(t, wait), EventHeldBy))
	assert.Equal(t, []string{"burnHog (service.js:21) 100%"}, eventStrings(profileEvent(t, hogSpan), EventTopFrames))
	period, _ := profileEvent(t, wait).Get(EventCPUPeriodMs)
	assert.InDelta(t, 50.0, period.Double(), 1e-9)
	assert.Equal(t, int64(5), h.samples(profilestore.SampleKept))
	assert.Zero(t, h.samples(profilestore.SampleUntimed))
}

// Its off-CPU profile samples switches and times each when the thread ran again: the join
// cannot place or total them, so they are counted as unsupported and no off_cpu field is
// written; its CPU samples are still read.
func TestEBPFProfilerOffCPUIsNotRead(t *testing.T) {
	const hostPID = 31337
	h := newHarness(t, nil)
	r := newRequest()
	w := r.profilerWindow(profilerResource(hostPID), 0, 5000)
	w.cpuAt(on{tid: hostPID, stack: r.stack(native("uv_run"))}, 1100)
	w.sample(w.off, on{tid: hostPID, stack: r.stack(native("epoll_wait"))}, []int64{int64(80e6), int64(5e6)}, 1090, 1180)
	h.sendProfiles(r)
	h.sendTraces(traces(service(hostPID), spanSpec{trace: 1, span: 1, start: 1000, end: 1200}))
	s := h.received()[spanID(1)]
	assert.InDelta(t, 50.0, attrDouble(t, s, AttrCPUNoSpanMs), 1e-9)
	for _, k := range []string{AttrOffCPUTraceMs, AttrOffCPUOtherTracesMs, AttrOffCPUNoSpanMs} {
		_, ok := s.Attributes().Get(k)
		assert.False(t, ok, k)
	}
	assert.Equal(t, int64(2), h.samples("unsupported"))
}

// Profile types are told by type and unit (and CPU samples by their period type): `samples` of
// a wall-clock profiler are not CPU time and are not read; `samples` in bytes, or without a
// period type, are counted as unsupported.
func TestProfileTypesByTypeAndUnit(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	st := r.stack(native("a"))
	w.cpuAt(on{tid: mainTID, stack: st}, 150)
	sp := r.pd.ResourceProfiles().At(0).ScopeProfiles().At(0)
	add := func(typ, unit, periodType string) {
		p := sp.Profiles().AppendEmpty()
		p.SampleType().SetTypeStrindex(r.str(typ))
		p.SampleType().SetUnitStrindex(r.str(unit))
		if periodType != "" {
			p.PeriodType().SetTypeStrindex(r.str(periodType))
			p.PeriodType().SetUnitStrindex(r.str("nanoseconds"))
		}
		p.SetPeriod(periodNs)
		p.SetTime(pcommon.Timestamp(ms(0)))
		p.SetDurationNano(uint64(ms(1000) - ms(0)))
		w.sample(p, on{tid: mainTID, stack: st}, []int64{1}, []int64{ms(120)})
	}
	add("samples", "count", "wall")
	add("samples", "bytes", "cpu")
	add("samples", "count", "")
	add("alloc_space", "count", "cpu")
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 160}))
	s := h.received()[spanID(1)]
	assert.InDelta(t, 10.0, attrDouble(t, s, AttrCPUNoSpanMs), 1e-9, "the agent's CPU sample only")
	assert.Equal(t, int64(3), h.samples("unsupported"))
	assert.Equal(t, int64(1), h.samples(profilestore.SampleKept))
}

// A profile that keeps no time per sample (values and no timestamps: an aggregated profile,
// or the agent's window past its time budget) cannot be placed in a span: its samples are
// refused, the spans of that thread get no CPU figure (on the old contract they got zeros) and
// are counted, and the Collector logs why once per resource and reason.
func TestRefusedSamplesLeaveFiguresOutAndAreLoggedOncePerResource(t *testing.T) {
	h := newHarness(t, nil)
	for i, pid := range []int64{mainTID, mainTID, mainTID + 100} {
		r := newRequest()
		start := float64(i * 1000)
		w := r.window(agentProcess(pid), start, start+1000)
		w.sample(w.cpu, on{tid: pid, trace: 1, span: byte(i + 1), stack: r.stack(js("burnHog", "/srv/app/service.js", 21))}, []int64{6}, nil)
		w.cpuAt(on{tid: pid + 1, stack: r.stack(native("gc"))}, start+500) // another thread, timed
		h.sendProfiles(r)
		h.sendTraces(traces(service(pid), spanSpec{trace: 1, span: byte(i + 1), start: start + 100, end: start + 200}))
	}
	got := h.received()
	require.Len(t, got, 3)
	for _, s := range got {
		for _, k := range []string{AttrCPUSpanMs, AttrCPUTraceMs, AttrCPUOtherTracesMs, AttrCPUNoSpanMs, AttrSamples} {
			_, ok := s.Attributes().Get(k)
			assert.False(t, ok, k)
		}
	}
	assert.Equal(t, int64(3), h.spans(spanSamplesRefused))
	assert.Equal(t, int64(3), h.samples(profilestore.SampleUntimed))
	logged := h.logs.FilterField(zap.String("outcome", profilestore.SampleUntimed)).All()
	require.Len(t, logged, 2, "once per resource: two processes")
	assert.Contains(t, logged[0].Message, "without a timestamp per value")
	assert.Equal(t, int64(mainTID), logged[0].ContextMap()["process.pid"])
	assert.Equal(t, int64(1), logged[0].ContextMap()["samples"])
}

// Allocations alone (no CPU or off-CPU sample of the thread) support alloc_bytes and nothing
// else; the span is counted as one without thread samples.
func TestAllocationsWithoutThreadSamples(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	w.allocAt(on{tid: mainTID, trace: 1, span: 1, stack: r.stack(js("build", "/a.js", 3))}, 120, 1<<20)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 160}))
	s := h.received()[spanID(1)]
	assert.Equal(t, int64(1<<20), attrInt(t, s, AttrAllocBytes))
	for _, k := range []string{AttrCPUSpanMs, AttrSamples, AttrOffCPUNoSpanMs} {
		_, ok := s.Attributes().Get(k)
		assert.False(t, ok, k)
	}
	assert.Equal(t, int64(1), h.spans(spanNoThreadSamples))
}
