// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package profilestore

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Joined is what a span's thread did between the span's start and end.
type Joined struct {
	TID          int64
	ThreadSource string
	// ns
	CPUSpan, CPUTrace, CPUOther, CPUNone int64
	OffTrace, OffOther, OffNone          int64
	// Off CPU but runnable: the thread waited for a CPU, whoever's span was active.
	Runnable int64
	// Its process's cgroup CPU throttling over the windows that overlap the span.
	Throttling Throttling
	AllocBytes int64
	Samples    int64
	// Whether the windows measured CPU, off-CPU time and allocations, and the CPU period.
	HasCPU, HasOff, HasAlloc bool
	PeriodNs                 int64
	// Whether the thread had a CPU or off-CPU sample in the windows (any, of any trace): the
	// sampler saw it, so a part without samples is a measured zero. SeenAlloc: an allocation
	// sample.
	Seen, SeenAlloc bool
	// The kinds of samples the windows refused on the thread: figures they touch are unknown.
	refused kindSet
	// The trace's own frames (CPU) and allocation frames, weighted.
	Frames, AllocFrames map[string]int64
	// The other traces on the thread, by trace.
	Others map[pcommon.TraceID]*Holder
	// Samples of this span timed outside it: clock skew.
	OwnOutside int
	// The routes the trace's samples on the thread in the span carried, by the time they
	// stand for: the request's route when its span has none.
	Routes map[string]int64
}

// noteRoute weighs a route the trace's samples in the span carried.
func (j *Joined) noteRoute(route string, ns int64) {
	if route == "" {
		return
	}
	if j.Routes == nil {
		j.Routes = map[string]int64{}
	}
	j.Routes[route] += ns
}

// Holder is another trace that held the thread during the span.
type Holder struct {
	NS int64
	// The routes its samples carried, by the time they stand for.
	Routes map[string]int64
	// What it held the thread in: its top frame, and whether it ran there or blocked there.
	Frames map[HoldFrame]int64
}

// HoldFrame is where a holder held the thread: a frame, on CPU or blocked in it.
type HoldFrame struct {
	Frame   string
	Blocked bool
}

// SpanTimes is the span being joined.
type SpanTimes struct {
	Trace      pcommon.TraceID
	Span       pcommon.SpanID
	Start, End int64
	// The thread the span says it started on (its thread.id: the id its process sees; 0 when it
	// says none), and the pid its resource says (0: none).
	OwnTID, OwnPID int64
}

// A start time in whole milliseconds comes from a millisecond clock: OpenTelemetry JS starts a
// span at Date.now() and ends it a performance.now() duration later, so the span really ran up
// to 1 ms later than it says. Measured against the agent's samples on one host: of 2,467
// samples linked to their span, 79 fell outside it, all after its end, by 0.004-0.87 ms. Such a
// span is placed in the middle of that millisecond; the error left is 0.5 ms at most.
const msClockShift = int64(500 * time.Microsecond)

// SpanTimesOf is the span as the join places it on the agent's clock.
func SpanTimesOf(s ptrace.Span) SpanTimes {
	st := SpanTimes{Trace: s.TraceID(), Span: s.SpanID(), Start: int64(s.StartTimestamp()), End: int64(s.EndTimestamp())}
	st.OwnTID = IntAttr(s.Attributes(), attrThreadID)
	if st.Start%int64(time.Millisecond) == 0 {
		st.Start += msClockShift
		st.End += msClockShift
	}
	return st
}

// Join collects what the span's thread did while the span was open, from every window of p
// that can hold a sample of that time.
func (p *Process) Join(st SpanTimes) *Joined {
	j := &Joined{Frames: map[string]int64{}, AllocFrames: map[string]int64{}, Others: map[pcommon.TraceID]*Holder{}}
	j.TID, j.ThreadSource = p.threadOf(st)
	for _, w := range p.windows {
		if !w.mayHold(st.Start, st.End) {
			continue
		}
		j.HasCPU = j.HasCPU || w.hasCPU
		j.HasOff = j.HasOff || w.hasOff
		j.HasAlloc = j.HasAlloc || w.hasAlloc
		if w.hasCPU {
			j.PeriodNs = w.periodNs
		}
		j.refused |= w.refusedOn(j.TID)
		j.addThrottling(w, st)
		tp := w.threads[j.TID]
		if tp == nil {
			continue
		}
		j.Seen = j.Seen || len(tp.cpu) > 0 || len(tp.off) > 0 || len(tp.runnable) > 0
		j.SeenAlloc = j.SeenAlloc || len(tp.alloc) > 0
		j.addCPU(w, tp, st)
		j.addOff(w, tp, st)
		j.addRunnable(tp, st)
		j.addAlloc(w, tp, st)
	}
	return j
}

// mayHold says whether a window can hold a sample of [start, end]: a CPU or allocation sample
// of that time lands in the window its time falls in, or the next; an off-CPU interval, in the
// window its thread ran again in, however long it was off.
func (w *window) mayHold(start, end int64) bool {
	return w.end+sampleLateness >= start && w.start-sampleLateness-w.maxOff <= end
}

// category is whose time a sample is, seen from the span.
func (st SpanTimes) category(l linkInfo) (own, trace, none bool) {
	if l.trace.IsEmpty() {
		return false, false, true
	}
	if l.trace == st.Trace {
		return l.span == st.Span, true, false
	}
	return false, false, false
}

func (j *Joined) addCPU(w *window, tp *threadPoints, st SpanTimes) {
	for _, pt := range from(tp.cpu, st.Start) {
		if pt.t > st.End {
			break
		}
		j.Samples += pt.w / max(w.periodNs, 1)
		l := w.links[pt.link]
		own, trace, none := st.category(l)
		switch {
		case trace:
			j.CPUTrace += pt.w
			j.noteRoute(l.route, pt.w)
			if own {
				j.CPUSpan += pt.w
			}
			j.Frames[w.frames[pt.frame]] += pt.w
		case none:
			j.CPUNone += pt.w
		default:
			j.CPUOther += pt.w
			j.hold(w, l, pt, pt.w, false)
		}
	}
	j.countOwnOutside(w, tp.cpu, st)
}

// skewBand is how far outside a span its own samples are looked for: an SDK and an agent on
// one host agree within a millisecond (docs/spanprofiles.md), so a sample of the span 100 ms
// outside it is a clock that moved, not sampling.
const skewBand = int64(100 * time.Millisecond)

// countOwnOutside counts this span's samples that fall just outside the span: the SDK's clock
// and the agent's disagree by at least that much.
func (j *Joined) countOwnOutside(w *window, ps []point, st SpanTimes) {
	own := func(pt point) bool {
		l := w.links[pt.link]
		return pt.link != 0 && l.span == st.Span && l.trace == st.Trace
	}
	for _, pt := range from(ps, st.Start-skewBand) {
		if pt.t >= st.Start {
			break
		}
		if own(pt) {
			j.OwnOutside++
		}
	}
	for _, pt := range from(ps, st.End+1) {
		if pt.t > st.End+skewBand {
			break
		}
		if own(pt) {
			j.OwnOutside++
		}
	}
}

func (j *Joined) addOff(w *window, tp *threadPoints, st SpanTimes) {
	for _, pt := range from(tp.off, st.Start-tp.maxOff) {
		if pt.t >= st.End {
			break
		}
		overlap := min(pt.end(), st.End) - max(pt.t, st.Start)
		if overlap <= 0 {
			continue
		}
		l := w.links[pt.link]
		_, trace, none := st.category(l)
		switch {
		case trace:
			j.OffTrace += overlap
			j.noteRoute(l.route, overlap)
		case none:
			j.OffNone += overlap
		default:
			j.OffOther += overlap
			j.hold(w, l, pt, overlap, true)
		}
	}
}

// addRunnable adds the time the thread was runnable but not running: it waited for a CPU, not
// for a request, so no trace is said to have held it (the trace active then was preempted
// too).
func (j *Joined) addRunnable(tp *threadPoints, st SpanTimes) {
	for _, pt := range from(tp.runnable, st.Start-tp.maxOff) {
		if pt.t >= st.End {
			break
		}
		if overlap := min(pt.end(), st.End) - max(pt.t, st.Start); overlap > 0 {
			j.Runnable += overlap
		}
	}
}

func (j *Joined) addAlloc(w *window, tp *threadPoints, st SpanTimes) {
	for _, pt := range from(tp.alloc, st.Start) {
		if pt.t > st.End {
			break
		}
		if l := w.links[pt.link]; l.trace == st.Trace && !l.trace.IsEmpty() {
			j.AllocBytes += pt.w
			j.AllocFrames[w.frames[pt.frame]] += pt.w
		}
	}
}

func (j *Joined) hold(w *window, l linkInfo, pt point, ns int64, blocked bool) {
	h := j.Others[l.trace]
	if h == nil {
		h = &Holder{Frames: map[HoldFrame]int64{}, Routes: map[string]int64{}}
		j.Others[l.trace] = h
	}
	h.NS += ns
	if l.route != "" {
		h.Routes[l.route] += ns
	}
	h.Frames[HoldFrame{w.frames[pt.frame], blocked}] += ns
}

// threadOf picks the thread a span ran on: the one it says (its thread.id, as the host knows
// that thread), else the one its own samples ran on, else the one its trace's samples in this
// process ran on (most samples first), else the main thread (tid == the host pid), a guess.
func (p *Process) threadOf(st SpanTimes) (int64, string) {
	if tid := p.hostTID(st.OwnTID, st.OwnPID); tid > 0 {
		return tid, ThreadFromAttribute
	}
	votes := map[int64]int{}
	for _, w := range p.windows {
		if !w.mayHold(st.Start, st.End) {
			continue
		}
		tt := w.traces[st.Trace]
		if tt == nil {
			continue
		}
		for _, s := range tt.spans {
			if s.span == st.Span {
				return s.tid, ThreadFromSpan
			}
		}
		for _, c := range tt.threads {
			votes[c.tid] += c.n
		}
	}
	best, n := int64(0), 0
	for tid, c := range votes {
		if c > n || (c == n && tid < best) {
			best, n = tid, c
		}
	}
	if n > 0 {
		return best, ThreadFromTrace
	}
	return p.key.hostPID, ThreadGuessMain
}

// Which figures the samples support. CPU and off-CPU parts: the windows measured them, the
// thread was seen in them, and none of its samples of that kind was refused (a refused sample
// could have been in the span). Allocations: the windows measured them (the process samples
// its allocations), none refused; V8 samples one allocation per 512 KiB on average, so no
// sample in a span is a measured "under about 512 KiB".
func (j *Joined) CPUKnown() bool { return j.HasCPU && j.Seen && !j.refused.has(kindCPU) }
func (j *Joined) OffKnown() bool { return j.HasOff && j.Seen && !j.refused.has(kindOff) }
func (j *Joined) AllocKnown() bool {
	return j.HasAlloc && (j.Seen || j.SeenAlloc) && !j.refused.has(kindAlloc)
}

// RefusedAny says whether a kind the windows measured had samples refused on the thread.
func (j *Joined) RefusedAny() bool {
	return (j.HasCPU && j.refused.has(kindCPU)) || (j.HasOff && j.refused.has(kindOff)) || (j.HasAlloc && j.refused.has(kindAlloc))
}

// hostTID maps the thread id a span says (tid, as its process sees it; pid, its resource's
// process.pid) to the host's thread id its samples carry; 0 when it cannot be told. A process in
// a PID namespace of its own (its spans' pid or the agent's process.vpid is not the host pid)
// knows its threads by other ids than the host:
//   - its main thread's id is its pid, which the agent knows by the host pid;
//   - a worker's id is mapped through the agent's samples, which carry it as thread.vid;
//   - without that (another profiler), a worker's id is not the host's: no mapping.
//
// Outside a namespace the ids are the host's.
func (p *Process) hostTID(tid, pid int64) int64 {
	if tid <= 0 {
		return 0
	}
	nsPID := p.id.PID
	if pid > 0 {
		nsPID = pid
	}
	if tid == nsPID {
		return p.key.hostPID
	}
	for _, w := range p.windows {
		if host, ok := w.vtids[tid]; ok {
			return host
		}
	}
	if nsPID != p.key.hostPID {
		return 0
	}
	return tid
}
