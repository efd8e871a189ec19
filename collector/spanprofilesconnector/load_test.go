// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/metadata"
)

// The node the load benchmark reproduces (docs/benchmarks.md): 20 services, each 200
// requests/s of 3 spans (a server span and two children), the agent at 99 Hz with 10 s windows
// and off-CPU and allocation profiles, NodeSDK exporting spans every 5 s in batches of at most
// 512. Each service's main thread is busy a quarter of the time: 25 CPU samples/s, linked to the
// request that ran; between requests it goes off CPU (2 intervals per request, 400/s); 20
// allocation samples/s. Stacks are 24 frames deep, from 40 distinct ones per service.
const (
	loadServices     = 20
	loadRequestsPerS = 200
	loadBusy         = 0.25
	loadOffPerReq    = 2
	loadAllocPerS    = 20
	loadWindow       = 10 * time.Second
	loadBatchEvery   = 5 * time.Second
	loadBatchMax     = 512
	loadStacks       = 40
	loadStackDepth   = 24
	loadHz           = 99
)

// loadService is one service's traffic of one second, as spans and samples.
type loadService struct {
	pid     int64
	res     map[string]any
	spans   ptrace.Traces // ended, not yet exported by the SDK
	samples []loadSample
}

// loadKind is which profile a generated sample goes to.
type loadKind int

const (
	loadCPU loadKind = iota
	loadOff
	loadAlloc
)

type loadSample struct {
	kind         loadKind
	t, v         int64
	trace        pcommon.TraceID
	span         pcommon.SpanID
	stack, route int
}

var loadRoutes = []string{"/api/users/:id", "/api/search", "/api/report", "/api/cart", "/health"}

// second generates one second of a service's requests from `at` (unix ns).
func (s *loadService) second(rng *rand.Rand, at int64) {
	ss := s.spans.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	period := int64(time.Second) / loadHz
	busyUntil := at
	for i := 0; i < loadRequestsPerS; i++ {
		start := at + int64(i)*int64(time.Second)/loadRequestsPerS + rng.Int64N(int64(time.Millisecond))
		dur := int64(2*time.Millisecond) + rng.Int64N(int64(30*time.Millisecond))
		var tid pcommon.TraceID
		binaryRand(rng, tid[:])
		route := rng.IntN(len(loadRoutes))
		server := s.span(ss, rng, tid, pcommon.SpanID{}, start, start+dur, "GET "+loadRoutes[route], ptrace.SpanKindServer, route)
		for c := 0; c < 2; c++ {
			cs := start + dur/4*int64(c+1)
			s.span(ss, rng, tid, server.SpanID(), cs, cs+dur/5, "db.query", ptrace.SpanKindClient, route)
		}
		// Its CPU: busy a quarter of the time, sampled every period.
		cpuNs := int64(float64(time.Second)/loadRequestsPerS*loadBusy) + rng.Int64N(int64(time.Millisecond))
		first := max(busyUntil, start)
		for t := first - first%period + period; t < first+cpuNs; t += period {
			s.samples = append(s.samples, loadSample{loadCPU, t, 1, tid, server.SpanID(), rng.IntN(loadStacks), route})
		}
		busyUntil = first + cpuNs
		for o := 0; o < loadOffPerReq; o++ {
			t := start + dur/loadOffPerReq*int64(o)
			s.samples = append(s.samples, loadSample{loadOff, t, dur / 3, pcommon.TraceID{}, pcommon.SpanID{}, rng.IntN(loadStacks), 0})
		}
	}
	for a := 0; a < loadAllocPerS; a++ {
		t := at + rng.Int64N(int64(time.Second))
		s.samples = append(s.samples, loadSample{loadAlloc, t, 512 << 10, pcommon.TraceID{1}, pcommon.SpanID{1}, rng.IntN(loadStacks), 0})
	}
}

func (s *loadService) span(ss ptrace.SpanSlice, rng *rand.Rand, trace pcommon.TraceID, parent pcommon.SpanID, start, end int64, name string, kind ptrace.SpanKind, route int) ptrace.Span {
	sp := ss.AppendEmpty()
	sp.SetTraceID(trace)
	var id pcommon.SpanID
	binaryRand(rng, id[:])
	sp.SetSpanID(id)
	sp.SetParentSpanID(parent)
	sp.SetName(name)
	sp.SetKind(kind)
	sp.SetStartTimestamp(pcommon.Timestamp(start))
	sp.SetEndTimestamp(pcommon.Timestamp(end))
	a := sp.Attributes()
	// What HTTP instrumentation puts on a server span, roughly.
	a.PutStr("http.request.method", "GET")
	a.PutStr("http.route", loadRoutes[route])
	a.PutStr("url.path", loadRoutes[route])
	a.PutStr("url.scheme", "http")
	a.PutInt("http.response.status_code", 200)
	a.PutStr("server.address", "shop.internal")
	a.PutInt("server.port", 8080)
	a.PutStr("network.protocol.version", "1.1")
	a.PutStr("client.address", "10.0.0.7")
	a.PutStr("user_agent.original", "load/1.0")
	return sp
}

func binaryRand(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// window encodes a service's samples of [from, to) as the agent's request does.
func (s *loadService) window(from, to int64) pprofile.Profiles {
	r := newRequest()
	w := r.window(s.res, float64(from-t0)/1e6, float64(to-t0)/1e6)
	stacks := make([]int32, loadStacks)
	for i := range stacks {
		frames := make([]frame, loadStackDepth)
		for d := range frames {
			if d < 4 {
				frames[d] = native(fmt.Sprintf("v8::internal::Builtin_%d_%d", i, d))
			} else {
				frames[d] = js(fmt.Sprintf("handler%d_%d", i, d), "/srv/app/routes.js", int64(10*d+i))
			}
		}
		stacks[i] = r.stack(frames...)
	}
	routes := make([]int32, len(loadRoutes))
	for i, rt := range loadRoutes {
		routes[i] = r.attr("http.route", rt)
	}
	thread := r.attr("thread.id", s.pid)
	links := map[pcommon.SpanID]int32{}
	kept := s.samples[:0]
	for _, p := range s.samples {
		if p.t >= to {
			kept = append(kept, p)
			continue
		}
		prof := w.cpu
		switch p.kind {
		case loadOff:
			prof = w.off
		case loadAlloc:
			prof = w.alloc
		}
		smp := prof.Samples().AppendEmpty()
		smp.SetStackIndex(stacks[p.stack])
		if p.trace != (pcommon.TraceID{}) {
			li, ok := links[p.span]
			if !ok {
				l := r.dict.LinkTable().AppendEmpty()
				l.SetTraceID(p.trace)
				l.SetSpanID(p.span)
				li = int32(r.dict.LinkTable().Len() - 1)
				links[p.span] = li
			}
			smp.SetLinkIndex(li)
			smp.AttributeIndices().Append(routes[p.route])
		}
		smp.AttributeIndices().Append(thread)
		smp.Values().Append(p.v)
		smp.TimestampsUnixNano().Append(uint64(p.t))
	}
	s.samples = kept
	return r.pd
}

// TestLoadBenchmark runs the node's load for SPANPROFILES_LOAD_SECONDS of virtual time (the
// Collector's clock is the benchmark's, so a minute of traffic runs as fast as the connector
// can take it) and prints the connector's CPU per span, the memory it held and the bytes
// enrichment adds per span. `bash bench/spanprofiles.sh` runs it; it is skipped otherwise.
func TestLoadBenchmark(t *testing.T) {
	seconds := 0
	if _, err := fmt.Sscan(os.Getenv("SPANPROFILES_LOAD_SECONDS"), &seconds); err != nil || seconds <= 0 {
		t.Skip("a benchmark: SPANPROFILES_LOAD_SECONDS=N runs N seconds of the node's load (bench/spanprofiles.sh)")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var clock atomic.Int64
	clock.Store(t0)
	counting := &countingSink{}
	set := connectortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = componenttest.NewNopTelemetrySettings()
	cfg := createDefaultConfig()
	f := NewFactory()
	tr, _ := f.CreateTracesToTraces(context.Background(), set, cfg, counting)
	pr, _ := f.CreateProfilesToTraces(context.Background(), set, cfg, counting)
	c := tr.(*tracesHalf).c
	// SPANPROFILES_LOAD_METRICS=1: the metrics side on too (a metrics pipeline takes them),
	// counted as they leave, every flush_interval (15 s) of virtual time.
	var points atomic.Int64
	if os.Getenv("SPANPROFILES_LOAD_METRICS") == "1" {
		mt, _ := f.CreateTracesToMetrics(context.Background(), set, cfg, consumerFunc(func(md pmetric.Metrics) { points.Add(int64(md.DataPointCount())) }))
		_ = mt.Start(context.Background(), componenttest.NewNopHost())
		defer func() { _ = mt.Shutdown(context.Background()) }()
	}
	c.now = func() time.Time { return time.Unix(0, clock.Load()) }
	ctx := context.Background()
	_ = tr.Start(ctx, componenttest.NewNopHost())
	_ = pr.Start(ctx, componenttest.NewNopHost())
	defer func() { _ = tr.Shutdown(ctx); _ = pr.Shutdown(ctx) }()

	services := make([]*loadService, loadServices)
	for i := range services {
		pid := int64(1000 + i)
		res := map[string]any{"service.name": fmt.Sprintf("svc-%d", i), "host.name": "node-1", "process.pid": pid, "service.instance.id": fmt.Sprintf("i-%d", i)}
		services[i] = &loadService{pid: pid, res: res}
	}
	newBatch := func(s *loadService) {
		s.spans = ptrace.NewTraces()
		rs := s.spans.ResourceSpans().AppendEmpty()
		_ = rs.Resource().Attributes().FromRaw(s.res)
		rs.ScopeSpans().AppendEmpty()
	}
	for _, s := range services {
		newBatch(s)
	}

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peakLive uint64
	var gcCPU, inCalls time.Duration
	// The CPU the process used while the connector ran (its calls, the GC they paid for).
	call := func(f func() error) {
		c0 := cpuTime()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		inCalls += cpuTime() - c0
	}
	cpu0 := cpuTime()
	spans := 0
	for sec := 0; sec < seconds; sec++ {
		at := t0 + int64(sec)*int64(time.Second)
		for _, s := range services {
			s.second(rng, at)
		}
		clock.Store(at + int64(time.Second))
		// The agent: each service's window of the last 10 s, staggered by service.
		for i, s := range services {
			if (sec+i)%int(loadWindow/time.Second) == 0 {
				now := clock.Load()
				pd := s.window(now-int64(loadWindow), now)
				call(func() error { return pr.ConsumeProfiles(ctx, pd) })
			}
		}
		// The SDKs: every 5 s, their ended spans in batches of 512.
		if (sec+1)%int(loadBatchEvery/time.Second) == 0 {
			for _, s := range services {
				all := s.spans.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
				spans += all.Len()
				for all.Len() > 0 {
					batch := ptrace.NewTraces()
					rs := batch.ResourceSpans().AppendEmpty()
					_ = rs.Resource().Attributes().FromRaw(s.res)
					dst := rs.ScopeSpans().AppendEmpty().Spans()
					n := 0
					all.RemoveIf(func(sp ptrace.Span) bool {
						if n >= loadBatchMax {
							return false
						}
						n++
						sp.MoveTo(dst.AppendEmpty())
						return true
					})
					call(func() error { return tr.ConsumeTraces(ctx, batch) })
				}
				newBatch(s)
			}
		}
		call(func() error { c.expire(); return nil })
		// Every 10 s, right after the SDKs' batches went in: what is live then is the
		// connector's (the generator holds only its samples not yet in a window, ~6 MiB). The
		// collection forced to see it is not the connector's CPU.
		if sec%10 == 9 {
			g := cpuTime()
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peakLive = max(peakLive, m.HeapAlloc)
			gcCPU += cpuTime() - g
		}
	}
	cpu := cpuTime() - cpu0 - gcCPU
	// What is held at the end, after a collection: windows for `retention`, spans waiting.
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	c.mu.Lock()
	held, pending := c.store.Held(), c.pending
	c.mu.Unlock()
	// The generator's own work (spans, windows encoded) is in the CPU time: measured alone below.
	gen := generatorCPU(seconds)
	fmt.Printf("load: %d services x %d requests/s x 3 spans, agent at %d Hz, %d s windows, %d s of traffic\n", loadServices, loadRequestsPerS, loadHz, int(loadWindow/time.Second), seconds)
	fmt.Printf("spans: %d sent, %d out (%d enriched)\n", spans, counting.spans, counting.enriched)
	fmt.Printf("CPU: %.2f s in all, %.2f s generating the load alone, %.2f s during the connector's calls: %.2f us per span for the connector (all less the generator), %.2f (during its calls)\n",
		cpu.Seconds(), gen.Seconds(), inCalls.Seconds(), float64((cpu-gen).Microseconds())/float64(spans), float64(inCalls.Microseconds())/float64(spans))
	fmt.Printf("memory: live heap %.0f MiB at the most (every 10 s, after a collection; %.0f MiB before the load), %.0f MiB at the end; %d samples and %d spans held at the end\n",
		mib(peakLive), mib(before.HeapAlloc), mib(after.HeapAlloc), held, pending)
	fmt.Printf("size: %.0f bytes of OTLP protobuf per span before enrichment, %.0f after (+%.0f)\n", counting.sizeBefore(), counting.sizeAfter(), counting.sizeAfter()-counting.sizeBefore())
	if c.metricsNext != nil {
		c.mu.Lock()
		series := c.metrics.Series()
		c.mu.Unlock()
		fmt.Printf("metrics: %d series at the default bounds (all metrics together), %d points sent\n", series, points.Load())
	}
}

// consumerFunc is a metrics consumer that only looks at what it is given.
type consumerFunc func(pmetric.Metrics)

func (f consumerFunc) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	f(md)
	return nil
}

func (consumerFunc) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// generatorCPU is the CPU the load's generation and encoding take without the connector.
func generatorCPU(seconds int) time.Duration {
	rng := rand.New(rand.NewPCG(1, 2))
	start := cpuTime()
	s := &loadService{pid: 1, res: map[string]any{"process.pid": int64(1)}}
	for sec := 0; sec < seconds*loadServices; sec++ {
		s.spans = ptrace.NewTraces()
		s.spans.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
		s.second(rng, t0+int64(sec%seconds)*int64(time.Second))
		if sec%int(loadWindow/time.Second) == 0 {
			_ = s.window(0, 1<<62)
		}
	}
	return cpuTime() - start
}

// countingSink counts the spans that come out and measures, on a sample of batches, their
// protobuf size with and without the connector's attributes and event.
type countingSink struct {
	consumertest.TracesSink
	spans, enriched      int
	measured             int
	spansMeasured        int
	bytesAfter, bytesRaw int
}

func (s *countingSink) sizeBefore() float64 {
	return float64(s.bytesRaw) / float64(max(s.spansMeasured, 1))
}
func (s *countingSink) sizeAfter() float64 {
	return float64(s.bytesAfter) / float64(max(s.spansMeasured, 1))
}

func (s *countingSink) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	s.spans += td.SpanCount()
	forEachSpan(td, func(sp ptrace.Span) {
		if isEnriched(sp) {
			s.enriched++
		}
	})
	// One batch in 20, from the load's steady state on.
	if s.measured++; s.measured%20 == 0 && s.spans > 100_000 {
		sizer := &ptrace.ProtoMarshaler{}
		s.bytesAfter += sizer.TracesSize(td)
		raw := ptrace.NewTraces()
		td.CopyTo(raw)
		forEachSpan(raw, func(sp ptrace.Span) {
			sp.Attributes().RemoveIf(func(k string, _ pcommon.Value) bool { return len(k) > 10 && k[:10] == "thread_ctx" })
			sp.Events().RemoveIf(func(e ptrace.SpanEvent) bool { return e.Name() == EventProfile })
		})
		s.bytesRaw += sizer.TracesSize(raw)
		s.spansMeasured += td.SpanCount()
	}
	return nil
}
