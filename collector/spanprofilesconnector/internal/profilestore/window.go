// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package profilestore

import (
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
)

// point is one profile sample as the join uses it: 24 bytes, held for `retention`.
type point struct {
	// Unix ns: when a CPU or allocation sample was taken, when an off-CPU interval began (the
	// thread was switched out).
	t int64
	// CPU: the ns the sample stands for (its count times the profile's period); off-CPU: the
	// interval's ns; allocation: the bytes the sample stands for.
	w int64
	// Index into window.links; 0: the thread had no span.
	link int32
	// Index into window.frames: the sample's top frame.
	frame int32
}

func (p point) end() int64 { return p.t + p.w }

// threadPoints is what one thread did in one window, each kind sorted by time. Off-CPU
// intervals are apart by the thread's state: asleep (off: blocked, or the loop idle) or
// runnable (waiting for a CPU: preempted, or throttled by its cgroup's quota).
type threadPoints struct {
	cpu, off, runnable, alloc []point
	// The longest off-CPU interval: how far before a span's start an interval that overlaps
	// it can begin.
	maxOff int64
}

// linkInfo is a span a sample was linked to, and the route its record carried.
type linkInfo struct {
	trace pcommon.TraceID
	span  pcommon.SpanID
	route string
}

// spanThread is a thread that samples of a span ran on.
type spanThread struct {
	span pcommon.SpanID
	tid  int64
}

// threadCount counts a trace's samples on one thread.
type threadCount struct {
	tid int64
	n   int
}

// traceThreads is where a trace's samples ran in one window: the first few (span, thread)
// pairs, and how many samples each thread had.
type traceThreads struct {
	spans   []spanThread
	threads []threadCount
}

// A trace's spans and threads in one window are few (a request runs on one JS thread); past
// these, more are not recorded, which only narrows the choice of thread.
const (
	maxSpansPerTrace   = 32
	maxThreadsPerTrace = 8
)

func (tt *traceThreads) add(span pcommon.SpanID, tid int64) {
	if len(tt.spans) < maxSpansPerTrace && !slices.Contains(tt.spans, spanThread{span, tid}) {
		tt.spans = append(tt.spans, spanThread{span, tid})
	}
	for i := range tt.threads {
		if tt.threads[i].tid == tid {
			tt.threads[i].n++
			return
		}
	}
	if len(tt.threads) < maxThreadsPerTrace {
		tt.threads = append(tt.threads, threadCount{tid, 1})
	}
}

// window is one process's profiles of one agent window.
type window struct {
	// The wall-clock time the agent's window covered, unix ns.
	start, end int64
	received   time.Time
	threads    map[int64]*threadPoints
	links      []linkInfo
	frames     []string
	traces     map[pcommon.TraceID]*traceThreads
	// The longest off-CPU interval of any thread: samples of a window may begin this long
	// before it.
	maxOff int64
	points int
	// Which profiles the window had: a span's off_cpu.* and alloc_bytes are set only when its
	// windows measured them.
	hasCPU, hasOff, hasAlloc bool
	periodNs                 int64
	// The process's cgroup CPU throttling over the window, where the agent read it.
	throttling Throttling
	// The kinds of samples refused, by thread (refusedAll: of a thread not known): the figures
	// they would have changed are left out of the spans the window covers.
	refused    map[int64]kindSet
	refusedAll kindSet
	// A namespaced process's thread ids as it sees them -> the host's (the agent's thread.vid).
	vtids map[int64]int64
}

// mapThread notes that thread vtid of a namespaced process is the host's thread tid.
func (w *window) mapThread(vtid, tid int64) {
	if vtid <= 0 || (len(w.vtids) >= maxVTIDs && w.vtids[vtid] == 0) {
		return
	}
	if w.vtids == nil {
		w.vtids = map[int64]int64{}
	}
	w.vtids[vtid] = tid
}

// kindSet is a set of sample kinds.
type kindSet uint8

func kindBit(k sampleKind) kindSet { return 1 << k }

func (s kindSet) has(k sampleKind) bool { return s&kindBit(k) != 0 }

// refuse notes that a sample of kind on thread tid (0: not known) was refused.
func (w *window) refuse(tid int64, kind sampleKind) {
	if tid <= 0 {
		w.refusedAll |= kindBit(kind)
		return
	}
	if w.refused == nil {
		w.refused = map[int64]kindSet{}
	}
	if _, ok := w.refused[tid]; !ok && len(w.refused) >= maxRefusedThreads {
		w.refusedAll |= kindBit(kind)
		return
	}
	w.refused[tid] |= kindBit(kind)
}

// maxRefusedThreads bounds the threads a window remembers refusals of (a request may name any
// number of threads); past it a refusal counts for every thread of the window.
const maxRefusedThreads = 1024

// refusedOn is the kinds of samples of thread tid the window refused.
func (w *window) refusedOn(tid int64) kindSet {
	return w.refusedAll | w.refused[tid]
}

func newWindow(start, end int64, received time.Time) *window {
	return &window{
		start:    start,
		end:      end,
		received: received,
		threads:  map[int64]*threadPoints{},
		links:    []linkInfo{{}},
		frames:   []string{profiledict.NoStack},
		traces:   map[pcommon.TraceID]*traceThreads{},
	}
}

func (w *window) thread(tid int64) *threadPoints {
	tp := w.threads[tid]
	if tp == nil {
		tp = &threadPoints{}
		w.threads[tid] = tp
	}
	return tp
}

// seal sorts every thread's points by time, for the binary searches of the join.
func (w *window) seal() {
	byTime := func(a, b point) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return 0
	}
	for _, tp := range w.threads {
		slices.SortFunc(tp.cpu, byTime)
		slices.SortFunc(tp.off, byTime)
		slices.SortFunc(tp.runnable, byTime)
		slices.SortFunc(tp.alloc, byTime)
		w.maxOff = max(w.maxOff, tp.maxOff)
	}
}

// from returns the points of ps (sorted by time) with t >= since.
func from(ps []point, since int64) []point {
	lo, hi := 0, len(ps)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ps[mid].t < since {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return ps[lo:]
}
