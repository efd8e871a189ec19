// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// enrich writes the contract's attributes and event onto a span: each figure the samples
// support (joined.cpuKnown and its siblings), and none that they do not.
func enrich(span ptrace.Span, j *joined, topN int, nameOf func(pcommon.TraceID) string) {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	a := span.Attributes()
	if j.cpuKnown() {
		a.PutDouble(AttrCPUSpanMs, ms(j.cpuSpan))
		a.PutDouble(AttrCPUTraceMs, ms(j.cpuTrace))
		a.PutDouble(AttrCPUOtherTracesMs, ms(j.cpuOther))
		a.PutDouble(AttrCPUNoSpanMs, ms(j.cpuNone))
		a.PutInt(AttrSamples, j.samples)
	}
	if j.offKnown() {
		a.PutDouble(AttrOffCPUTraceMs, ms(j.offTrace))
		a.PutDouble(AttrOffCPUOtherTracesMs, ms(j.offOther))
		a.PutDouble(AttrOffCPUNoSpanMs, ms(j.offNone))
		a.PutDouble(AttrOffCPURunnableMs, ms(j.runnable))
	}
	if j.allocKnown() {
		a.PutInt(AttrAllocBytes, j.allocBytes)
	}

	ev := span.Events().AppendEmpty()
	ev.SetName(EventProfile)
	ev.SetTimestamp(span.EndTimestamp())
	ea := ev.Attributes()
	if j.cpuKnown() {
		putStrings(ea, EventTopFrames, percentages(j.frames, topN))
	}
	if j.cpuKnown() || j.offKnown() {
		// A trace that held the thread for under 1 % of the span explains none of it: it is
		// not listed, only counted in the remainder.
		held := j.heldBy(topN, max(int64(span.EndTimestamp()-span.StartTimestamp())/100, minHeldNs), nameOf)
		putStrings(ea, EventHeldBy, held.listed)
		if len(j.others) > 0 {
			ea.PutInt(EventHeldByOthers, int64(held.others))
			ea.PutDouble(EventHeldByOthersMs, ms(held.othersNs))
		}
		putStrings(ea, EventHeldByRoutes, held.routes)
	}
	if j.allocKnown() {
		putStrings(ea, EventTopAllocFrames, percentages(j.allocFrames, topN))
	}
	putThrottling(ea, j)
	ea.PutInt(EventThreadID, j.tid)
	ea.PutStr(EventThreadSource, j.threadSource)
	if j.cpuKnown() && j.periodNs > 0 {
		ea.PutDouble(EventCPUPeriodMs, ms(j.periodNs))
	}
}

// minHeldNs is the least a trace must hold the thread to be listed in held_by: 0.1 ms, the
// precision the entry prints (a listed "0.0ms" explains nothing).
const minHeldNs = int64(100 * time.Microsecond)

// putStrings sets a string array attribute, or nothing for an empty list.
func putStrings(m pcommon.Map, k string, vs []string) {
	if len(vs) == 0 {
		return
	}
	s := m.PutEmptySlice(k)
	s.EnsureCapacity(len(vs))
	for _, v := range vs {
		s.AppendEmpty().SetStr(v)
	}
}

// isEnriched says whether a span carries the contract already (a Collector before this one
// enriched it): its event.
func isEnriched(span ptrace.Span) bool {
	events := span.Events()
	for i := 0; i < events.Len(); i++ {
		if events.At(i).Name() == EventProfile {
			return true
		}
	}
	return false
}
