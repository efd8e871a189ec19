// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// enrich writes the contract's attributes and event onto a span: each figure the samples
// support (profilestore.Joined.CPUKnown and its siblings), and none that they do not.
func enrich(span ptrace.Span, j *profilestore.Joined, topN int, nameOf func(pcommon.TraceID) string) {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	a := span.Attributes()
	if j.CPUKnown() {
		a.PutDouble(AttrCPUSpanMs, ms(j.CPUSpan))
		a.PutDouble(AttrCPUTraceMs, ms(j.CPUTrace))
		a.PutDouble(AttrCPUOtherTracesMs, ms(j.CPUOther))
		a.PutDouble(AttrCPUNoSpanMs, ms(j.CPUNone))
		a.PutInt(AttrSamples, j.Samples)
	}
	if j.OffKnown() {
		a.PutDouble(AttrOffCPUTraceMs, ms(j.OffTrace))
		a.PutDouble(AttrOffCPUOtherTracesMs, ms(j.OffOther))
		a.PutDouble(AttrOffCPUNoSpanMs, ms(j.OffNone))
		a.PutDouble(AttrOffCPURunnableMs, ms(j.Runnable))
	}
	if j.AllocKnown() {
		a.PutInt(AttrAllocBytes, j.AllocBytes)
	}

	ev := span.Events().AppendEmpty()
	ev.SetName(EventProfile)
	ev.SetTimestamp(span.EndTimestamp())
	ea := ev.Attributes()
	if j.CPUKnown() {
		putStrings(ea, EventTopFrames, percentages(j.Frames, topN))
	}
	if j.CPUKnown() || j.OffKnown() {
		// A trace that held the thread for under 1 % of the span explains none of it: it is
		// not listed, only counted in the remainder.
		held := listHeldBy(j, topN, max(int64(span.EndTimestamp()-span.StartTimestamp())/100, minHeldNs), nameOf)
		putStrings(ea, EventHeldBy, held.listed)
		if len(j.Others) > 0 {
			ea.PutInt(EventHeldByOthers, int64(held.others))
			ea.PutDouble(EventHeldByOthersMs, ms(held.othersNs))
		}
		putStrings(ea, EventHeldByRoutes, held.routes)
	}
	if j.AllocKnown() {
		putStrings(ea, EventTopAllocFrames, percentages(j.AllocFrames, topN))
	}
	putThrottling(ea, j)
	ea.PutInt(EventThreadID, j.TID)
	ea.PutStr(EventThreadSource, j.ThreadSource)
	if j.CPUKnown() && j.PeriodNs > 0 {
		ea.PutDouble(EventCPUPeriodMs, ms(j.PeriodNs))
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
