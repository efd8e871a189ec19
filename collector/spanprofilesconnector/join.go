// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
)

// joined is what a span's thread did between the span's start and end.
type joined struct {
	tid          int64
	threadSource string
	// ns
	cpuSpan, cpuTrace, cpuOther, cpuNone int64
	offTrace, offOther, offNone          int64
	// Off CPU but runnable: the thread waited for a CPU, whoever's span was active.
	runnable int64
	// Its process's cgroup CPU throttling over the windows that overlap the span.
	throttling cgroupThrottling
	allocBytes int64
	samples    int64
	// Whether the windows measured CPU, off-CPU time and allocations, and the CPU period.
	hasCPU, hasOff, hasAlloc bool
	periodNs                 int64
	// Whether the thread had a CPU or off-CPU sample in the windows (any, of any trace): the
	// sampler saw it, so a part without samples is a measured zero. seenAlloc: an allocation
	// sample.
	seen, seenAlloc bool
	// The kinds of samples the windows refused on the thread: figures they touch are unknown.
	refused kindSet
	// The trace's own frames (CPU) and allocation frames, weighted.
	frames, allocFrames map[string]int64
	// The other traces on the thread, by trace.
	others map[pcommon.TraceID]*holder
	// Samples of this span timed outside it: clock skew.
	ownOutside int
	// The routes the trace's samples on the thread in the span carried, by the time they
	// stand for: the request's route when its span has none.
	routes map[string]int64
}

// noteRoute weighs a route the trace's samples in the span carried.
func (j *joined) noteRoute(route string, ns int64) {
	if route == "" {
		return
	}
	if j.routes == nil {
		j.routes = map[string]int64{}
	}
	j.routes[route] += ns
}

// holder is another trace that held the thread during the span.
type holder struct {
	ns int64
	// The routes its samples carried, by the time they stand for.
	routes map[string]int64
	// What it held the thread in: its top frame, and whether it ran there or blocked there.
	frames map[holdFrame]int64
}

// holdFrame is where a holder held the thread: a frame, on CPU or blocked in it.
type holdFrame struct {
	frame   string
	blocked bool
}

// spanTimes is the span being joined.
type spanTimes struct {
	trace      pcommon.TraceID
	span       pcommon.SpanID
	start, end int64
	// The thread the span says it started on (its thread.id: the id its process sees; 0 when it
	// says none), and the pid its resource says (0: none).
	ownTID, ownPID int64
}

// A start time in whole milliseconds comes from a millisecond clock: OpenTelemetry JS starts a
// span at Date.now() and ends it a performance.now() duration later, so the span really ran up
// to 1 ms later than it says. Measured against the agent's samples on one host: of 2,467
// samples linked to their span, 79 fell outside it, all after its end, by 0.004-0.87 ms. Such a
// span is placed in the middle of that millisecond; the error left is 0.5 ms at most.
const msClockShift = int64(500 * time.Microsecond)

// spanTimesOf is the span as the join places it on the agent's clock.
func spanTimesOf(s ptrace.Span) spanTimes {
	st := spanTimes{trace: s.TraceID(), span: s.SpanID(), start: int64(s.StartTimestamp()), end: int64(s.EndTimestamp())}
	st.ownTID = intAttr(s.Attributes(), attrThreadID)
	if st.start%int64(time.Millisecond) == 0 {
		st.start += msClockShift
		st.end += msClockShift
	}
	return st
}

// join collects what the span's thread did while the span was open, from every window of p
// that can hold a sample of that time.
func (p *process) join(st spanTimes) *joined {
	j := &joined{frames: map[string]int64{}, allocFrames: map[string]int64{}, others: map[pcommon.TraceID]*holder{}}
	j.tid, j.threadSource = p.threadOf(st)
	for _, w := range p.windows {
		if !w.mayHold(st.start, st.end) {
			continue
		}
		j.hasCPU = j.hasCPU || w.hasCPU
		j.hasOff = j.hasOff || w.hasOff
		j.hasAlloc = j.hasAlloc || w.hasAlloc
		if w.hasCPU {
			j.periodNs = w.periodNs
		}
		j.refused |= w.refusedOn(j.tid)
		j.addThrottling(w, st)
		tp := w.threads[j.tid]
		if tp == nil {
			continue
		}
		j.seen = j.seen || len(tp.cpu) > 0 || len(tp.off) > 0 || len(tp.runnable) > 0
		j.seenAlloc = j.seenAlloc || len(tp.alloc) > 0
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
func (st spanTimes) category(l linkInfo) (own, trace, none bool) {
	if l.trace.IsEmpty() {
		return false, false, true
	}
	if l.trace == st.trace {
		return l.span == st.span, true, false
	}
	return false, false, false
}

func (j *joined) addCPU(w *window, tp *threadPoints, st spanTimes) {
	for _, pt := range from(tp.cpu, st.start) {
		if pt.t > st.end {
			break
		}
		j.samples += pt.w / max(w.periodNs, 1)
		l := w.links[pt.link]
		own, trace, none := st.category(l)
		switch {
		case trace:
			j.cpuTrace += pt.w
			j.noteRoute(l.route, pt.w)
			if own {
				j.cpuSpan += pt.w
			}
			j.frames[w.frames[pt.frame]] += pt.w
		case none:
			j.cpuNone += pt.w
		default:
			j.cpuOther += pt.w
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
func (j *joined) countOwnOutside(w *window, ps []point, st spanTimes) {
	own := func(pt point) bool {
		l := w.links[pt.link]
		return pt.link != 0 && l.span == st.span && l.trace == st.trace
	}
	for _, pt := range from(ps, st.start-skewBand) {
		if pt.t >= st.start {
			break
		}
		if own(pt) {
			j.ownOutside++
		}
	}
	for _, pt := range from(ps, st.end+1) {
		if pt.t > st.end+skewBand {
			break
		}
		if own(pt) {
			j.ownOutside++
		}
	}
}

func (j *joined) addOff(w *window, tp *threadPoints, st spanTimes) {
	for _, pt := range from(tp.off, st.start-tp.maxOff) {
		if pt.t >= st.end {
			break
		}
		overlap := min(pt.end(), st.end) - max(pt.t, st.start)
		if overlap <= 0 {
			continue
		}
		l := w.links[pt.link]
		_, trace, none := st.category(l)
		switch {
		case trace:
			j.offTrace += overlap
			j.noteRoute(l.route, overlap)
		case none:
			j.offNone += overlap
		default:
			j.offOther += overlap
			j.hold(w, l, pt, overlap, true)
		}
	}
}

// addRunnable adds the time the thread was runnable but not running: it waited for a CPU, not
// for a request, so no trace is said to have held it (the trace active then was preempted
// too).
func (j *joined) addRunnable(tp *threadPoints, st spanTimes) {
	for _, pt := range from(tp.runnable, st.start-tp.maxOff) {
		if pt.t >= st.end {
			break
		}
		if overlap := min(pt.end(), st.end) - max(pt.t, st.start); overlap > 0 {
			j.runnable += overlap
		}
	}
}

func (j *joined) addAlloc(w *window, tp *threadPoints, st spanTimes) {
	for _, pt := range from(tp.alloc, st.start) {
		if pt.t > st.end {
			break
		}
		if l := w.links[pt.link]; l.trace == st.trace && !l.trace.IsEmpty() {
			j.allocBytes += pt.w
			j.allocFrames[w.frames[pt.frame]] += pt.w
		}
	}
}

func (j *joined) hold(w *window, l linkInfo, pt point, ns int64, blocked bool) {
	h := j.others[l.trace]
	if h == nil {
		h = &holder{frames: map[holdFrame]int64{}, routes: map[string]int64{}}
		j.others[l.trace] = h
	}
	h.ns += ns
	if l.route != "" {
		h.routes[l.route] += ns
	}
	h.frames[holdFrame{w.frames[pt.frame], blocked}] += ns
}

// topFrame is the frame a holder held the thread in longest, on CPU and blocked together.
func (h *holder) topFrame() string {
	byFrame := make(map[string]int64, len(h.frames))
	for f, ns := range h.frames {
		byFrame[f.frame] += ns
	}
	if f := top(byFrame, 1); len(f) == 1 {
		return f[0].name
	}
	return profiledict.NoStack
}

// threadOf picks the thread a span ran on: the one it says (its thread.id, as the host knows
// that thread), else the one its own samples ran on, else the one its trace's samples in this
// process ran on (most samples first), else the main thread (tid == the host pid), a guess.
func (p *process) threadOf(st spanTimes) (int64, string) {
	if tid := p.hostTID(st.ownTID, st.ownPID); tid > 0 {
		return tid, threadFromAttribute
	}
	votes := map[int64]int{}
	for _, w := range p.windows {
		if !w.mayHold(st.start, st.end) {
			continue
		}
		tt := w.traces[st.trace]
		if tt == nil {
			continue
		}
		for _, s := range tt.spans {
			if s.span == st.span {
				return s.tid, threadFromSpan
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
		return best, threadFromTrace
	}
	return p.key.hostPID, threadGuessMain
}

// Which figures the samples support. CPU and off-CPU parts: the windows measured them, the
// thread was seen in them, and none of its samples of that kind was refused (a refused sample
// could have been in the span). Allocations: the windows measured them (the process samples
// its allocations), none refused; V8 samples one allocation per 512 KiB on average, so no
// sample in a span is a measured "under about 512 KiB".
func (j *joined) cpuKnown() bool { return j.hasCPU && j.seen && !j.refused.has(kindCPU) }
func (j *joined) offKnown() bool { return j.hasOff && j.seen && !j.refused.has(kindOff) }
func (j *joined) allocKnown() bool {
	return j.hasAlloc && (j.seen || j.seenAlloc) && !j.refused.has(kindAlloc)
}

// refusedAny says whether a kind the windows measured had samples refused on the thread.
func (j *joined) refusedAny() bool {
	return (j.hasCPU && j.refused.has(kindCPU)) || (j.hasOff && j.refused.has(kindOff)) || (j.hasAlloc && j.refused.has(kindAlloc))
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
func (p *process) hostTID(tid, pid int64) int64 {
	if tid <= 0 {
		return 0
	}
	nsPID := p.id.pid
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

// weighted is a frame (or trace) and its weight.
type weighted struct {
	name string
	w    int64
}

// top returns the n heaviest entries of m, heaviest first, ties by name.
func top(m map[string]int64, n int) []weighted {
	out := make([]weighted, 0, len(m))
	for k, v := range m {
		out = append(out, weighted{k, v})
	}
	slices.SortFunc(out, func(a, b weighted) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	return out[:min(n, len(out))]
}

// percentages renders the n heaviest frames of m as "frame NN%" (of m's total), as the
// summary of `thread-ctx report` does.
func percentages(m map[string]int64, n int) []string {
	var total int64
	for _, v := range m {
		total += v
	}
	if total <= 0 {
		return nil
	}
	var out []string
	for _, f := range top(m, n) {
		pct := 100 * float64(f.w) / float64(total)
		if pct < 0.5 {
			out = append(out, f.name+" <1%")
		} else {
			out = append(out, fmt.Sprintf("%s %.0f%%", f.name, pct))
		}
	}
	return out
}

// heldBy is who held the thread during a span: the traces that held it longest, each with
// its route, and every other trace as a remainder, so that listed and remainder add up to the
// time other requests held the thread (cpu.other_traces_ms + off_cpu.other_traces_ms); and the
// same time rolled up by route.
type heldBy struct {
	// "<route or span name> <trace id> <ms>ms: <top frame>", longest first.
	listed []string
	// The traces not listed, and their time.
	others   int
	othersNs int64
	// "<route> <ms>ms in <n> requests: <top frame>", longest first; past n routes, the rest
	// as one "(<k> other routes) ..." entry.
	routes []string
}

// holderName is the route a holder is listed under: the handler's route its samples carried
// most (a middleware's mount path `/` is no route), else its request's name (names.go: the
// route, templated path or name of its server span), else "(unknown)".
func holderName(h *holder, id pcommon.TraceID, nameOf func(pcommon.TraceID) string) string {
	if r := bestRoute(h.routes); r != "" {
		return r
	}
	if who := nameOf(id); who != "" {
		return who
	}
	return "(unknown)"
}

// heldBy lists the n traces that held the thread longest, each at least minNs, and rolls all
// of them up by route (n routes at most, the rest as one entry).
func (j *joined) heldBy(n int, minNs int64, nameOf func(pcommon.TraceID) string) heldBy {
	byTrace := make(map[string]int64, len(j.others))
	ids := make(map[string]pcommon.TraceID, len(j.others))
	type routeSum struct {
		ns     int64
		n      int
		frames map[string]int64
	}
	routes := map[string]*routeSum{}
	var total int64
	for id, h := range j.others {
		total += h.ns
		name := holderName(h, id, nameOf)
		r := routes[name]
		if r == nil {
			r = &routeSum{frames: map[string]int64{}}
			routes[name] = r
		}
		r.ns += h.ns
		r.n++
		for f, ns := range h.frames {
			r.frames[f.frame] += ns
		}
		if h.ns < minNs {
			continue
		}
		k := id.String()
		byTrace[k] = h.ns
		ids[k] = id
	}
	var out heldBy
	var listedNs int64
	for _, t := range top(byTrace, n) {
		id := ids[t.name]
		h := j.others[id]
		listedNs += h.ns
		out.listed = append(out.listed, fmt.Sprintf("%s %s %.1fms: %s", holderName(h, id, nameOf), t.name, float64(h.ns)/1e6, h.topFrame()))
	}
	out.others = len(j.others) - len(out.listed)
	out.othersNs = total - listedNs
	byRoute := make(map[string]int64, len(routes))
	for name, r := range routes {
		byRoute[name] = r.ns
	}
	ranked := top(byRoute, len(byRoute))
	for i, t := range ranked {
		if i == n && len(ranked) > n+1 {
			var ns int64
			var reqs int
			for _, rest := range ranked[n:] {
				ns += rest.w
				reqs += routes[rest.name].n
			}
			out.routes = append(out.routes, fmt.Sprintf("(%d other routes) %.1fms in %d requests", len(ranked)-n, float64(ns)/1e6, reqs))
			break
		}
		r := routes[t.name]
		frame := profiledict.NoStack
		if f := top(r.frames, 1); len(f) == 1 {
			frame = f[0].name
		}
		out.routes = append(out.routes, fmt.Sprintf("%s %.1fms in %d requests: %s", t.name, float64(r.ns)/1e6, r.n, frame))
	}
	return out
}
