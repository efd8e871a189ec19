// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"

	"math"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The path over whole traces, for the trace tier (collector/tier.yaml, its span_path processor,
// spanpathprocessor/): node Collectors enrich
// their own processes' spans with their own agent's profiles and send each trace, keyed by its
// id, to one tier Collector, where groupbytrace hands a trace's spans over together. Those spans
// carry their causes already (the contract's attributes and events), so the path needs no
// profiles: each request's cause is read back from its span, and the path of each first
// request is written as on a node, replacing the one its node wrote from what it saw.

// WritePaths writes the EventPath event on each first request of td's traces that called a
// service whose request is in td too, replacing any path event it carried; it returns how many
// it wrote.
func WritePaths(td ptrace.Traces, topN int) int {
	spans := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for k := 0; k < sss.Len(); k++ {
			spans += sss.At(k).Spans().Len()
		}
	}
	if spans == 0 {
		return 0
	}
	// One entry per trace of the batch (groupbytrace releases one trace per batch).
	t := newTraceNames(spans)
	for i := 0; i < rss.Len(); i++ {
		t.note(rss.At(i))
	}
	forEachServer(td, func(_ procRef, s ptrace.Span) {
		cause := ""
		if isEnriched(s) {
			cause = causeFromSpan(s)
		}
		t.settled(s, cause)
	}, t)
	written := 0
	forEachServer(td, func(proc procRef, s ptrace.Span) {
		hops := t.pathOf(s, proc)
		if hops == nil {
			return
		}
		s.Events().RemoveIf(func(e ptrace.SpanEvent) bool { return e.Name() == EventPath })
		putPath(s, hops, topN)
		written++
	}, t)
	return written
}

// forEachServer calls f with each server span of td and its process.
func forEachServer(td ptrace.Traces, f func(procRef, ptrace.Span), t *traceNames) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		proc := t.ref(profilestore.IdentityOf(rss.At(i).Resource().Attributes()))
		sss := rss.At(i).ScopeSpans()
		for k := 0; k < sss.Len(); k++ {
			spans := sss.At(k).Spans()
			for n := 0; n < spans.Len(); n++ {
				if s := spans.At(n); s.Kind() == ptrace.SpanKindServer {
					f(proc, s)
				}
			}
		}
	}
}

// causeFromSpan is causeOf read back from an enriched span: the same parts from its
// attributes (cpu.trace_ms and the two hottest of top_frames; off_cpu.runnable_ms;
// off_cpu.trace_ms; the other traces' time, named by the first of held_by, which lists the
// longest first). Where no other trace held the thread for 1 % of the span (held_by lists
// none), the holder is the first of held_by_routes: the route that held it longest.
func causeFromSpan(s ptrace.Span) string {
	attrs := s.Attributes()
	var profile pcommon.Map
	events := s.Events()
	for i := 0; i < events.Len(); i++ {
		if events.At(i).Name() == EventProfile {
			profile = events.At(i).Attributes()
		}
	}
	var c causeParts
	if ns, ok := msAttr(attrs, AttrCPUTraceMs); ok {
		frames := strs(profile, EventTopFrames)
		c.cpu(ns, strings.Join(frames[:min(2, len(frames))], ", "))
	}
	if ns, ok := msAttr(attrs, AttrOffCPURunnableMs); ok {
		c.runnable(ns)
	}
	if ns, ok := msAttr(attrs, AttrOffCPUTraceMs); ok {
		c.blocked(ns)
	}
	cpuOther, _ := msAttr(attrs, AttrCPUOtherTracesMs)
	offOther, _ := msAttr(attrs, AttrOffCPUOtherTracesMs)
	if held := cpuOther + offOther; held >= minHeldNs {
		who, frame := "(unknown)", profiledict.NoStack
		if w, f, ok := firstHolder(strs(profile, EventHeldBy), "ms: ", isHeldByHead); ok {
			who, frame = w, f
		} else if w, f, ok := firstHolder(strs(profile, EventHeldByRoutes), " requests: ", isRouteHead); ok {
			who, frame = w, f
		}
		c.held(held, who, frame)
	}
	return c.String()
}

// msAttr reads a double attribute in ms as ns.
func msAttr(attrs pcommon.Map, k string) (int64, bool) {
	v, ok := attrs.Get(k)
	if !ok || v.Type() != pcommon.ValueTypeDouble {
		return 0, false
	}
	return int64(math.Round(v.Double() * 1e6)), true
}

// strs reads a string array attribute (nil when absent).
func strs(m pcommon.Map, k string) []string {
	if m == (pcommon.Map{}) {
		return nil
	}
	v, ok := m.Get(k)
	if !ok || v.Type() != pcommon.ValueTypeSlice {
		return nil
	}
	out := make([]string, 0, v.Slice().Len())
	for i := 0; i < v.Slice().Len(); i++ {
		out = append(out, v.Slice().At(i).AsString())
	}
	return out
}

// firstHolder splits the first entry of a held_by list at sep into who held the thread and its
// top frame: a held_by entry, "<who> <trace id> <ms>ms: <frame>", or a held_by_routes one,
// "<route> <ms>ms in <n> requests: <frame>". A name may hold spaces and the separator itself,
// so each place sep occurs is tried until what precedes it has the entry's shape (head says
// where the name ends, or -1).
func firstHolder(entries []string, sep string, head func(string) int) (who, frame string, ok bool) {
	if len(entries) == 0 {
		return "", "", false
	}
	e := entries[0]
	for from := 0; ; {
		k := strings.Index(e[from:], sep)
		if k < 0 {
			return "", "", false
		}
		k += from
		if end := head(e[:k]); end >= 0 {
			return e[:end], e[k+len(sep):], true
		}
		from = k + 1
	}
}

// isHeldByHead: "<who> <trace id> <ms>" (the "ms" cut off): where <who> ends, or -1.
func isHeldByHead(h string) int {
	rest, ms, ok := cutLast(h)
	if !ok || !isDecimal(ms) {
		return -1
	}
	rest, id, ok := cutLast(rest)
	if !ok || len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return -1
	}
	return len(rest)
}

// isRouteHead: "<route> <ms>ms in <n>": where <route> ends, or -1.
func isRouteHead(h string) int {
	rest, n, ok := cutLast(h)
	if !ok || strings.Trim(n, "0123456789") != "" || n == "" {
		return -1
	}
	rest, in, ok := cutLast(rest)
	if !ok || in != "in" {
		return -1
	}
	rest, ms, ok := cutLast(rest)
	if !ok || !strings.HasSuffix(ms, "ms") || !isDecimal(strings.TrimSuffix(ms, "ms")) {
		return -1
	}
	return len(rest)
}

// cutLast splits s at its last space.
func cutLast(s string) (before, last string, ok bool) {
	i := strings.LastIndexByte(s, ' ')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

func isDecimal(s string) bool {
	return s != "" && strings.Trim(s, "0123456789.") == ""
}
