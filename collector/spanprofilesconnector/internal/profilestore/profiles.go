// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package profilestore

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
)

const (
	// The agent drains its ring buffer every few ms and ends a window after a last drain, so a
	// sample lands in the window after the one its time falls in only at the edge; 2 s leaves
	// room for a loaded machine. A sample timed further outside its window is refused.
	sampleLateness = int64(2 * time.Second)
	// The agent's windows are 1 s to minutes long (`--interval`); a window claiming more than
	// an hour is refused, so one bad window cannot cover every span.
	maxWindowNs = int64(time.Hour)
	// Gaps between a process's windows shorter than this are the agent's own bookkeeping
	// (microseconds between one window's end and the next one's start), not missing time.
	windowGapNs = int64(100 * time.Millisecond)
	// The values a sample may carry: up to 1,000 CPU samples in one (the agent sends one per
	// timestamp), an off-CPU interval of at most a day, an allocation sample of at most 1 TiB.
	maxCPUCount   = 1_000
	maxOffCPUNs   = int64(24 * time.Hour)
	maxAllocBytes = int64(1) << 40
	// The sampling period: between 1 µs (1 MHz) and 10 s (0.1 Hz).
	minPeriodNs = int64(time.Microsecond)
	maxPeriodNs = int64(10 * time.Second)
	// A window maps at most this many namespace thread ids (a process runs a few dozen threads).
	maxVTIDs = 4_096
)

// sampleKind is which of the profiles the join reads a Profile is.
type sampleKind int

const (
	kindOther sampleKind = iota
	kindCPU
	kindOff
	kindAlloc
	// A profile of a type the join reads, in a form it cannot use: another unit, or off-CPU
	// intervals of a profiler other than the agent. Its samples are counted as unsupported.
	kindUnsupported
)

// kindOf says which profile p is, by its sample type and unit (and, for CPU samples, its
// period type); scope is the instrumentation scope that sent it.
func kindOf(d *profiledict.Dictionary, scope string, p pprofile.Profile) sampleKind {
	typ, _ := d.Str(p.SampleType().TypeStrindex())
	unit, _ := d.Str(p.SampleType().UnitStrindex())
	switch typ {
	case sampleTypeCPU:
		periodType, _ := d.Str(p.PeriodType().TypeStrindex())
		periodUnit, _ := d.Str(p.PeriodType().UnitStrindex())
		if unit == sampleUnitCPU && periodType == periodTypeCPU && periodUnit == periodUnitCPU {
			return kindCPU
		}
		// `samples` of another period (wall time, events) are not CPU time; without a period
		// type they may be, but what each stands for is unknown.
		if periodType != periodTypeCPU && periodType != "" {
			return kindOther
		}
	case SampleTypeOff:
		if unit == sampleUnitOff && scope == agentScope {
			return kindOff
		}
	case sampleTypeAlloc:
		if unit == sampleUnitAlloc {
			return kindAlloc
		}
	default:
		return kindOther
	}
	return kindUnsupported
}

// sampleCounts is what became of a window's samples.
type sampleCounts struct {
	kept, invalid, untimed, noThread, overBound, unsupported int
}

// windowBuilder turns one process's profiles of one agent window into a window.
type windowBuilder struct {
	dict *profiledict.Dictionary
	w    *window
	// Per request dictionary index -> index in the window's tables.
	links  map[int32]int32
	frames map[string]int32
	counts sampleCounts
	// Points the window may still take (max_samples).
	room int
}

// windowOf builds the window of one ResourceProfiles, or returns nil when its profiles have
// no valid time range (counted by the caller).
func windowOf(dict *profiledict.Dictionary, rp pprofile.ResourceProfiles, received time.Time, room int) (*window, sampleCounts) {
	start, end := int64(-1), int64(-1)
	forEachProfile(dict, rp, func(p pprofile.Profile, _ sampleKind) {
		s := int64(p.Time())
		e := s + int64(min(p.DurationNano(), uint64(maxWindowNs)+1))
		if start < 0 || s < start {
			start = s
		}
		end = max(end, e)
	})
	if start <= 0 || end <= start || end-start > maxWindowNs {
		n := 0
		forEachProfile(dict, rp, func(p pprofile.Profile, _ sampleKind) { n += p.Samples().Len() })
		return nil, sampleCounts{invalid: n}
	}
	b := &windowBuilder{dict: dict, w: newWindow(start, end, received), links: map[int32]int32{}, frames: map[string]int32{profiledict.NoStack: 0}, room: room}
	forEachProfile(dict, rp, b.addProfile)
	b.w.seal()
	return b.w, b.counts
}

// forEachProfile calls f with every profile of rp that the join reads (or counts as
// unsupported).
func forEachProfile(dict *profiledict.Dictionary, rp pprofile.ResourceProfiles, f func(pprofile.Profile, sampleKind)) {
	sps := rp.ScopeProfiles()
	for i := 0; i < sps.Len(); i++ {
		scope := sps.At(i).Scope().Name()
		ps := sps.At(i).Profiles()
		for j := 0; j < ps.Len(); j++ {
			if k := kindOf(dict, scope, ps.At(j)); k != kindOther {
				f(ps.At(j), k)
			}
		}
	}
}

func (b *windowBuilder) addProfile(p pprofile.Profile, kind sampleKind) {
	samples := p.Samples()
	period := p.Period()
	if kind == kindUnsupported {
		for i := 0; i < samples.Len(); i++ {
			b.counts.unsupported += max(samples.At(i).TimestampsUnixNano().Len(), 1)
		}
		return
	}
	if kind == kindCPU {
		if period < minPeriodNs || period > maxPeriodNs {
			b.counts.invalid += samples.Len()
			b.w.refuse(0, kind)
			return
		}
		b.w.hasCPU = true
		b.w.periodNs = period
	}
	b.w.hasOff = b.w.hasOff || kind == kindOff
	b.w.hasAlloc = b.w.hasAlloc || kind == kindAlloc
	if t, ok := readThrottling(b.dict, p); ok {
		b.w.throttling = t
	}
	for i := 0; i < samples.Len(); i++ {
		b.addSample(samples.At(i), kind, period)
	}
}

func (b *windowBuilder) addSample(s pprofile.Sample, kind sampleKind, period int64) {
	values, times := s.Values(), s.TimestampsUnixNano()
	n := values.Len()
	// The events a refused sample stands for: one per value, or per timestamp without values.
	events := max(n, times.Len(), 1)
	tid, route, runnable, ok := b.threadAndRoute(s)
	if !ok {
		b.counts.invalid += events
		b.w.refuse(0, kind)
		return
	}
	if tid <= 0 {
		b.counts.noThread += events
		b.w.refuse(0, kind)
		return
	}
	// One value per timestamp; or a CPU sample counting its timestamps, as one value equal to
	// their number or as no value at all (OTLP makes values optional: one event per
	// timestamp, which is how the eBPF profiler sends CPU samples).
	each := times.Len() == n && n > 0
	counted := kind == kindCPU && times.Len() > 0 && (n == 0 || (n == 1 && int64(times.Len()) == values.At(0)))
	if !each && !counted {
		b.counts.untimed += events
		b.w.refuse(tid, kind)
		return
	}
	link, frame, ok := b.linkAndFrame(s, route)
	if !ok {
		b.counts.invalid += events
		b.w.refuse(tid, kind)
		return
	}
	tp := b.w.thread(tid)
	var trace *traceThreads
	if link != 0 {
		l := b.w.links[link]
		if trace = b.w.traces[l.trace]; trace == nil {
			trace = &traceThreads{}
			b.w.traces[l.trace] = trace
		}
	}
	for i := 0; i < times.Len(); i++ {
		v := int64(1)
		if each {
			v = values.At(i)
		}
		t := int64(times.At(i))
		p, valid := b.point(kind, t, v, period)
		if !valid {
			b.counts.invalid++
			b.w.refuse(tid, kind)
			continue
		}
		if b.room == 0 {
			b.counts.overBound++
			b.w.refuse(tid, kind)
			continue
		}
		p.link, p.frame = link, frame
		switch kind {
		case kindCPU:
			tp.cpu = append(tp.cpu, p)
		case kindOff:
			if runnable {
				tp.runnable = append(tp.runnable, p)
			} else {
				tp.off = append(tp.off, p)
			}
			tp.maxOff = max(tp.maxOff, p.w)
		case kindAlloc:
			tp.alloc = append(tp.alloc, p)
		}
		if trace != nil {
			trace.add(b.w.links[link].span, tid)
		}
		b.room--
		b.w.points++
		b.counts.kept++
	}
}

// point checks one value and its time against the window, and weighs it.
func (b *windowBuilder) point(kind sampleKind, t, v, period int64) (point, bool) {
	lo, hi := b.w.start-sampleLateness, b.w.end+sampleLateness
	switch kind {
	case kindCPU:
		if v < 1 || v > maxCPUCount || t < lo || t > hi {
			return point{}, false
		}
		return point{t: t, w: v * period}, true
	case kindOff:
		// Sent when the thread ran again: its end is in the window, its start may be long before.
		if v < 1 || v > maxOffCPUNs || t > hi || t+v < lo || t+v > hi {
			return point{}, false
		}
		return point{t: t, w: v}, true
	default:
		if v < 1 || v > maxAllocBytes || t < lo || t > hi {
			return point{}, false
		}
		return point{t: t, w: v}, true
	}
}

// threadAndRoute reads a sample's thread, route and, for an off-CPU interval, whether the
// thread was runnable (preempted: it waited for a CPU) rather than asleep. A profiler that does
// not say (the OpenTelemetry eBPF profiler's off-CPU samples) is read as asleep.
func (b *windowBuilder) threadAndRoute(s pprofile.Sample) (tid int64, route string, runnable, ok bool) {
	attrs := s.AttributeIndices()
	for i := 0; i < attrs.Len(); i++ {
		k, v, ok := b.dict.Attribute(attrs.At(i))
		if !ok {
			return 0, "", false, false
		}
		switch k {
		case attrThreadID:
			if v.Type() == pcommon.ValueTypeInt {
				tid = v.Int()
			}
		case AttrHTTPRoute, labelPrefix + AttrHTTPRoute:
			route = profiledict.Truncate(v.AsString())
		case attrOffCPUState:
			runnable = v.Type() == pcommon.ValueTypeStr && v.Str() == offCPUPreempted
		case attrThreadVID:
			if v.Type() == pcommon.ValueTypeInt && tid > 0 {
				b.w.mapThread(v.Int(), tid)
			}
		}
	}
	return tid, route, runnable, true
}

func (b *windowBuilder) linkAndFrame(s pprofile.Sample, route string) (link, frame int32, ok bool) {
	li := s.LinkIndex()
	link, known := b.links[li]
	if !known {
		trace, span, ok := b.dict.Link(li)
		if !ok {
			return 0, 0, false
		}
		// The zero link (index 0, or all-zero ids): the thread had no span.
		if !trace.IsEmpty() && !span.IsEmpty() {
			link = int32(len(b.w.links))
			b.w.links = append(b.w.links, linkInfo{trace: trace, span: span, route: route})
		}
		b.links[li] = link
	} else if link != 0 && b.w.links[link].route == "" {
		b.w.links[link].route = route
	}
	label, ok := b.dict.FrameLabel(s.StackIndex())
	if !ok {
		return 0, 0, false
	}
	frame, known = b.frames[label]
	if !known {
		frame = int32(len(b.w.frames))
		b.w.frames = append(b.w.frames, label)
		b.frames[label] = frame
	}
	return link, frame, true
}
