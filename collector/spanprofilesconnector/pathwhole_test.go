// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// merged is everything the sinks of hs received, as one batch: what groupbytrace hands the
// trace tier's span_path processor once each node's Collector has sent a trace's spans.
func merged(hs ...*harness) ptrace.Traces {
	out := ptrace.NewTraces()
	for _, h := range hs {
		for _, td := range h.sink.AllTraces() {
			td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
		}
	}
	return out
}

// throughTier writes td's paths as the span_path processor does (spanpathprocessor/) and
// returns its spans by span id.
func throughTier(t *testing.T, td ptrace.Traces) map[pcommon.SpanID]ptrace.Span {
	t.Helper()
	WritePaths(td, 5)
	out := map[pcommon.SpanID]ptrace.Span{}
	forEachSpan(td, func(s ptrace.Span) { out[s.SpanID()] = s })
	return out
}

func countEvents(s ptrace.Span, name string) int {
	n := 0
	for i := 0; i < s.Events().Len(); i++ {
		if s.Events().At(i).Name() == name {
			n++
		}
	}
	return n
}

// The two-node variant of TestTraceAcrossServices: the gateway's node and inventory's node each
// enrich their own spans with their own profiles; neither writes a path (each saw half the
// trace); the trace tier, given both halves, writes on each gateway request the very path the
// one node wrote when it saw both services.
func TestTierPathIsTheOneNodePath(t *testing.T) {
	one := newHarness(t, nil)
	sendAcrossServices(one)
	want := one.received()

	gwNode, invNode := newHarness(t, nil), newHarness(t, nil)
	sendAcrossServicesTo(gwNode, invNode)
	for id, s := range gwNode.received() {
		_, ok := findEvent(s, EventPath)
		assert.False(t, ok, "the gateway's node wrote a path from half a trace on %v", id)
	}
	got := throughTier(t, merged(gwNode, invNode))
	for _, root := range []pcommon.SpanID{spanID(1<<4 | 1), spanID(2<<4 | 1)} {
		require.Contains(t, got, root)
		wantHops := eventStrings(pathEvent(t, want[root]), EventPathHops)
		require.NotEmpty(t, wantHops)
		assert.Equal(t, wantHops, eventStrings(pathEvent(t, got[root]), EventPathHops))
		assert.Equal(t, 1, countEvents(got[root], EventPath))
	}
	_, onInventory := findEvent(got[spanID(1<<4|4)], EventPath)
	assert.False(t, onInventory, "the path is written on the trace's first request only")
}

// A path its node wrote (it saw some of the trace's services, not all) is replaced by the
// tier's, never listed beside it.
func TestTierReplacesANodesPath(t *testing.T) {
	gwNode, invNode := newHarness(t, nil), newHarness(t, nil)
	sendAcrossServicesTo(gwNode, invNode)
	td := merged(gwNode, invNode)
	forEachSpan(td, func(s ptrace.Span) {
		if s.SpanID() == spanID(1<<4|1) {
			putPath(s, []pathHop{{key: "waiting on inventory", ns: 70e6}}, 5)
		}
	})
	root := throughTier(t, td)[spanID(1<<4|1)]
	assert.Equal(t, 1, countEvents(root, EventPath))
	assert.Contains(t, eventStrings(pathEvent(t, root), EventPathHops)[0], "waiting on inventory /stock/:sku 60.0ms: cpu 20.0ms in recomputeStockLevels")
}

// A trace none of whose called services' spans reached the tier (lost, or handed on by
// groupbytrace before they came) gets no path from it: nothing crossed to another service.
func TestTierWritesNoPathFromHalfATrace(t *testing.T) {
	gwNode, invNode := newHarness(t, nil), newHarness(t, nil)
	sendAcrossServicesTo(gwNode, invNode)
	got := throughTier(t, merged(gwNode))
	require.Contains(t, got, spanID(1<<4|1))
	_, ok := findEvent(got[spanID(1<<4|1)], EventPath)
	assert.False(t, ok)
}

// A request's cause read back from its enriched span is the one its node computed from the
// samples, also where the holder is only in held_by_routes (under 1 % of the span each).
func TestCauseFromSpan(t *testing.T) {
	s := ptrace.NewSpan()
	s.SetKind(ptrace.SpanKindServer)
	assert.Equal(t, "no samples", causeFromSpan(s))
	require.NoError(t, s.Attributes().FromRaw(map[string]any{
		AttrCPUTraceMs: 20.0, AttrCPUOtherTracesMs: 1.5, AttrOffCPUTraceMs: 3.0, AttrOffCPUOtherTracesMs: 0.5, AttrOffCPURunnableMs: 60.0,
	}))
	ev := s.Events().AppendEmpty()
	ev.SetName(EventProfile)
	putStrings(ev.Attributes(), EventTopFrames, []string{"hot (a.js:1) 90%", "warm (a.js:2) 10%", "cold (a.js:3) <1%"})
	putStrings(ev.Attributes(), EventHeldByRoutes, []string{"/price/:sku 2.0ms in 3 requests: priceOf (inventory.js:40)"})
	assert.Equal(t, "waiting for a CPU 60.0ms; cpu 20.0ms in hot (a.js:1) 90%, warm (a.js:2) 10%; blocked 3.0ms; held by /price/:sku 2.0ms: priceOf (inventory.js:40)", causeFromSpan(s))
}

// A holder's name may hold spaces and the entry's separators: each place they occur is tried.
func TestFirstHolder(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	for _, c := range []struct{ entry, who, frame string }{
		{"query ProductPage " + id + " 20.0ms: resolveProduct (gateway.js:30)", "query ProductPage", "resolveProduct (gateway.js:30)"},
		{"query Odd 5ms: name " + id + " 1.5ms: f (a.js:1)", "query Odd 5ms: name", "f (a.js:1)"},
		{"(unknown) " + id + " 0.1ms: (no stack)", "(unknown)", "(no stack)"},
	} {
		who, frame, ok := firstHolder([]string{c.entry}, "ms: ", isHeldByHead)
		require.True(t, ok, c.entry)
		assert.Equal(t, []string{c.who, c.frame}, []string{who, frame})
	}
	who, frame, ok := firstHolder([]string{"/a 3 requests: b 2.0ms in 3 requests: f (a.js:1)"}, " requests: ", isRouteHead)
	require.True(t, ok)
	assert.Equal(t, []string{"/a 3 requests: b", "f (a.js:1)"}, []string{who, frame})
	for _, bad := range []string{"no id 2.0ms: f", id + " 2.0ms: f", "who " + id + " twoms: f"} {
		_, _, ok := firstHolder([]string{bad}, "ms: ", isHeldByHead)
		assert.False(t, ok, bad)
	}
	_, _, ok = firstHolder(nil, "ms: ", isHeldByHead)
	assert.False(t, ok)
}

// The trace tier's cost per span: the path of a ProductPage trace as TestTierPathIsTheOneNodePath
// makes it (two services, enriched), written again on each iteration. `go test -bench TierPath
// -run '^$'` in collector/spanprofilesconnector (docs/benchmarks.md).
func BenchmarkTierPath(b *testing.B) {
	gwNode, invNode := newHarness(b, nil), newHarness(b, nil)
	sendAcrossServicesTo(gwNode, invNode)
	td := merged(gwNode, invNode)
	if WritePaths(td, 5) != 2 {
		b.Fatal("no path")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		WritePaths(td, 5)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*td.SpanCount()), "ns/span")
}
