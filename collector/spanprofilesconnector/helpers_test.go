// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/connector/xconnector"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/metadata"
)

// Times in tests: ms after t0 (a wall-clock instant like the agent's, not on a whole
// millisecond: see msClockShift).
const t0 = int64(1_760_000_000_000_000_123)

func ms(v float64) int64 { return t0 + int64(v*1e6) }

const periodNs = int64(10 * time.Millisecond) // 100 Hz

// harness is a connector built by its factory, both halves started, spans going to a sink, its
// own telemetry readable and its clock set by the test.
type harness struct {
	t        testing.TB
	c        *spanProfiles
	sink     *consumertest.TracesSink
	traces   connector.Traces
	profiles xconnector.Profiles
	tel      *componenttest.Telemetry
	clock    atomic.Int64
	// What the connector logged (Info and above).
	logs *observer.ObservedLogs
	// Its component id: the state its halves share.
	id component.ID
}

// harnesses numbers the harnesses made.
var harnesses atomic.Int64

func newHarness(t testing.TB, mutate func(*Config)) *harness {
	t.Helper()
	cfg := createDefaultConfig()
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	h := &harness{t: t, sink: &consumertest.TracesSink{}, tel: componenttest.NewTelemetry()}
	h.clock.Store(ms(0) + int64(time.Hour)) // arrival times are the Collector's: any instant works
	set := connectortest.NewNopSettings(metadata.Type)
	// One id per harness: two harnesses of one test are two Collectors (two nodes), not one
	// state shared by id.
	set.ID = component.MustNewIDWithName(metadata.Type.String(), fmt.Sprintf("%s-%d", t.Name(), harnesses.Add(1)))
	h.id = set.ID
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	var core zapcore.Core
	core, h.logs = observer.New(zapcore.InfoLevel)
	set.TelemetrySettings.Logger = zap.New(core)
	f := NewFactory()
	var err error
	h.traces, err = f.CreateTracesToTraces(context.Background(), set, cfg, h.sink)
	require.NoError(t, err)
	h.profiles, err = f.CreateProfilesToTraces(context.Background(), set, cfg, h.sink)
	require.NoError(t, err)
	h.c = h.traces.(*tracesHalf).c
	require.Same(t, h.c, h.profiles.(*profilesHalf).c, "one state per component id")
	h.c.now = func() time.Time { return time.Unix(0, h.clock.Load()) }
	require.NoError(t, h.traces.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, h.profiles.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() {
		require.NoError(t, h.traces.Shutdown(context.Background()))
		require.NoError(t, h.profiles.Shutdown(context.Background()))
		require.NoError(t, h.tel.Shutdown(context.Background()))
	})
	return h
}

// advance moves the Collector's clock and runs the wait and retention check.
func (h *harness) advance(d time.Duration) {
	h.clock.Add(int64(d))
	h.c.expire()
}

func (h *harness) sendTraces(td ptrace.Traces) {
	h.t.Helper()
	require.NoError(h.t, h.traces.ConsumeTraces(context.Background(), td))
}

func (h *harness) sendProfiles(r *request) {
	h.t.Helper()
	require.NoError(h.t, h.profiles.ConsumeProfiles(context.Background(), r.pd))
}

// count reads the connector's counter `name` for one outcome (0 when never counted).
func (h *harness) count(name, outcome string) int64 {
	h.t.Helper()
	m, err := h.tel.GetMetric(name)
	if err != nil {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(h.t, ok, "%s is a sum", name)
	var n int64
	for _, dp := range sum.DataPoints {
		if v, ok := dp.Attributes.Value("outcome"); (ok && v.AsString() == outcome) || outcome == "" {
			n += dp.Value
		}
	}
	return n
}

func (h *harness) spans(outcome string) int64 {
	return h.count("otelcol_connector_spanprofiles_spans", outcome)
}

func (h *harness) samples(outcome string) int64 {
	return h.count("otelcol_connector_spanprofiles_samples", outcome)
}

func (h *harness) windows(outcome string) int64 {
	return h.count("otelcol_connector_spanprofiles_windows", outcome)
}

// received returns every span the sink got, by span id.
func (h *harness) received() map[pcommon.SpanID]ptrace.Span {
	out := map[pcommon.SpanID]ptrace.Span{}
	for _, td := range h.sink.AllTraces() {
		forEachSpan(td, func(s ptrace.Span) { out[s.SpanID()] = s })
	}
	return out
}

func forEachSpan(td ptrace.Traces, f func(ptrace.Span)) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				f(spans.At(k))
			}
		}
	}
}

func traceID(b byte) pcommon.TraceID {
	return pcommon.TraceID{b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b}
}
func spanID(b byte) pcommon.SpanID { return pcommon.SpanID{b, b, b, b, b, b, b, b} }

// spanSpec is a span to send: its ids, times (ms after t0), kind and name.
type spanSpec struct {
	trace, span byte
	start, end  float64
	name        string
	route       string
	server      bool
}

// service is the resource of a service's spans, as NodeSDK's detectors make it.
func service(pid int64, extra ...string) map[string]any {
	m := map[string]any{"service.name": "shop", "host.name": "node-1", "process.pid": pid}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

func traces(resource map[string]any, specs ...spanSpec) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	require.NoError(nil, rs.Resource().Attributes().FromRaw(resource))
	ss := rs.ScopeSpans().AppendEmpty()
	for _, sp := range specs {
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(traceID(sp.trace))
		s.SetSpanID(spanID(sp.span))
		s.SetStartTimestamp(pcommon.Timestamp(ms(sp.start)))
		s.SetEndTimestamp(pcommon.Timestamp(ms(sp.end)))
		s.SetName(sp.name)
		if sp.server {
			s.SetKind(ptrace.SpanKindServer)
		} else {
			s.SetParentSpanID(spanID(0xee))
		}
		if sp.route != "" {
			s.Attributes().PutStr("http.route", sp.route)
		}
	}
	return td
}

// request builds an OTLP/Profiles request the way `thread-ctx agent` encodes one
// (reader/src/otlp/encode.rs): one shared dictionary with zero values at index 0, per process a
// CPU profile (samples/count, period cpu/nanoseconds), an off-CPU one (off_cpu/nanoseconds) and
// the allocation pair (alloc_objects/count, alloc_space/bytes), one value and timestamp per event.
type request struct {
	pd   pprofile.Profiles
	dict pprofile.ProfilesDictionary
}

func newRequest() *request {
	pd := pprofile.NewProfiles()
	d := pd.Dictionary()
	d.StringTable().Append("")
	d.AttributeTable().AppendEmpty()
	d.LinkTable().AppendEmpty()
	d.StackTable().AppendEmpty()
	d.LocationTable().AppendEmpty()
	d.FunctionTable().AppendEmpty()
	d.MappingTable().AppendEmpty()
	return &request{pd: pd, dict: d}
}

func (r *request) str(s string) int32 {
	i, err := pprofile.SetString(r.dict.StringTable(), s)
	if err != nil {
		panic(err)
	}
	return i
}

func (r *request) attr(k string, v any) int32 {
	a := pprofile.NewKeyValueAndUnit()
	a.SetKeyStrindex(r.str(k))
	if err := a.Value().FromRaw(v); err != nil {
		panic(err)
	}
	i, err := pprofile.SetAttribute(r.dict.AttributeTable(), a)
	if err != nil {
		panic(err)
	}
	return i
}

func (r *request) link(trace, span byte) int32 {
	if trace == 0 {
		return 0
	}
	l := pprofile.NewLink()
	l.SetTraceID(traceID(trace))
	l.SetSpanID(spanID(span))
	i, err := pprofile.SetLink(r.dict.LinkTable(), l)
	if err != nil {
		panic(err)
	}
	return i
}

// frame is a stack frame: a JS function (file and line) or a native one (no file).
type frame struct {
	name, file string
	line       int64
}

func js(name, file string, line int64) frame { return frame{name, file, line} }
func native(name string) frame               { return frame{name: name} }

// stack returns the index of a stack of frames, leaf first.
func (r *request) stack(frames ...frame) int32 {
	st := pprofile.NewStack()
	for _, f := range frames {
		fn := pprofile.NewFunction()
		fn.SetNameStrindex(r.str(f.name))
		fn.SetFilenameStrindex(r.str(f.file))
		fn.SetStartLine(f.line)
		fi, err := pprofile.SetFunction(r.dict.FunctionTable(), fn)
		if err != nil {
			panic(err)
		}
		loc := pprofile.NewLocation()
		ln := loc.Lines().AppendEmpty()
		ln.SetFunctionIndex(fi)
		ln.SetLine(f.line)
		typ := "native"
		if f.file != "" {
			typ = "v8js"
		}
		loc.AttributeIndices().Append(r.attr("profile.frame.type", typ))
		li, err := pprofile.SetLocation(r.dict.LocationTable(), loc)
		if err != nil {
			panic(err)
		}
		st.LocationIndices().Append(li)
	}
	i, err := pprofile.SetStack(r.dict.StackTable(), st)
	if err != nil {
		panic(err)
	}
	return i
}

// processWindow is one process's profiles in the request.
type processWindow struct {
	r                *request
	cpu, off, alloc  pprofile.Profile
	objects          pprofile.Profile
	start, durationN int64
}

// agentProcess is the resource the agent sends: the process context's attributes (the SDK's
// resource, republished by the context manager) with the host's pid.
func agentProcess(hostPID int64, extra ...any) map[string]any {
	m := map[string]any{"service.name": "shop", "host.name": "node-1", "process.pid": hostPID}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

// window adds a process's window [start, end) (ms after t0).
func (r *request) window(resource map[string]any, start, end float64) *processWindow {
	rp := r.pd.ResourceProfiles().AppendEmpty()
	if err := rp.Resource().Attributes().FromRaw(resource); err != nil {
		panic(err)
	}
	sp := rp.ScopeProfiles().AppendEmpty()
	sp.Scope().SetName("thread-ctx")
	w := &processWindow{r: r, start: ms(start), durationN: ms(end) - ms(start)}
	add := func(typ, unit string) pprofile.Profile {
		p := sp.Profiles().AppendEmpty()
		p.SampleType().SetTypeStrindex(r.str(typ))
		p.SampleType().SetUnitStrindex(r.str(unit))
		p.PeriodType().SetTypeStrindex(r.str("cpu"))
		p.PeriodType().SetUnitStrindex(r.str("nanoseconds"))
		p.SetPeriod(periodNs)
		p.SetTime(pcommon.Timestamp(w.start))
		p.SetDurationNano(uint64(w.durationN))
		return p
	}
	w.cpu = add("samples", "count")
	w.off = add("off_cpu", "nanoseconds")
	w.objects = add("alloc_objects", "count")
	w.alloc = add("alloc_space", "bytes")
	return w
}

// on says where a sample was taken: its thread, the span its thread had published (0: none),
// its route, its stack.
type on struct {
	tid         int64
	trace, span byte
	route       string
	stack       int32
}

func (w *processWindow) sample(p pprofile.Profile, at on, values []int64, times []int64) {
	s := p.Samples().AppendEmpty()
	s.SetStackIndex(at.stack)
	s.SetLinkIndex(w.r.link(at.trace, at.span))
	s.AttributeIndices().Append(w.r.attr("thread.id", at.tid))
	s.AttributeIndices().Append(w.r.attr("thread.name", "node"))
	if at.route != "" {
		s.AttributeIndices().Append(w.r.attr("http.route", at.route))
	}
	s.Values().FromRaw(values)
	ts := make([]uint64, len(times))
	for i, t := range times {
		ts[i] = uint64(t)
	}
	s.TimestampsUnixNano().FromRaw(ts)
}

// cpuAt adds one CPU sample per time (ms after t0).
func (w *processWindow) cpuAt(at on, times ...float64) *processWindow {
	values := make([]int64, len(times))
	ts := make([]int64, len(times))
	for i, t := range times {
		values[i], ts[i] = 1, ms(t)
	}
	w.sample(w.cpu, at, values, ts)
	return w
}

// cpuEvery adds CPU samples every period from `from` to `to` (ms, both ends in).
func (w *processWindow) cpuEvery(at on, from, to float64) *processWindow {
	var times []float64
	for t := from; t <= to+1e-9; t += float64(periodNs) / 1e6 {
		times = append(times, t)
	}
	return w.cpuAt(at, times...)
}

// offCPU adds an off-CPU interval from `from` to `to` (ms): switched out at `from`.
func (w *processWindow) offCPU(at on, from, to float64) *processWindow {
	w.sample(w.off, at, []int64{ms(to) - ms(from)}, []int64{ms(from)})
	return w
}

// allocAt adds an allocation sample of `bytes` at `t` (ms), in both sibling profiles.
func (w *processWindow) allocAt(at on, t float64, bytes int64) *processWindow {
	w.sample(w.objects, at, []int64{1}, []int64{ms(t)})
	w.sample(w.alloc, at, []int64{bytes}, []int64{ms(t)})
	return w
}

func attrDouble(t *testing.T, s ptrace.Span, k string) float64 {
	t.Helper()
	v, ok := s.Attributes().Get(k)
	require.True(t, ok, "span %s has %s", s.SpanID(), k)
	require.Equal(t, pcommon.ValueTypeDouble, v.Type(), k)
	return v.Double()
}

func attrInt(t *testing.T, s ptrace.Span, k string) int64 {
	t.Helper()
	v, ok := s.Attributes().Get(k)
	require.True(t, ok, "span %s has %s", s.SpanID(), k)
	require.Equal(t, pcommon.ValueTypeInt, v.Type(), k)
	return v.Int()
}

// profileEvent returns the span's thread_ctx.profile event's attributes.
func profileEvent(t *testing.T, s ptrace.Span) pcommon.Map {
	t.Helper()
	for i := 0; i < s.Events().Len(); i++ {
		if e := s.Events().At(i); e.Name() == EventProfile {
			return e.Attributes()
		}
	}
	require.Fail(t, "no thread_ctx.profile event", "span %s", s.SpanID())
	return pcommon.NewMap()
}

func eventStrings(m pcommon.Map, k string) []string {
	v, ok := m.Get(k)
	if !ok {
		return nil
	}
	var out []string
	for i := 0; i < v.Slice().Len(); i++ {
		out = append(out, v.Slice().At(i).Str())
	}
	return out
}

type (
	ptraceSpan      = ptrace.Span
	metricdataGauge = metricdata.Gauge[int64]
)

// typeStr is the connector's type in a configuration (metadata.yaml's).
var typeStr = metadata.Type.String()
