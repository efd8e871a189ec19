// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// A request's path across services: where a span waited on a call to another service (a client
// span whose server span the same Collector saw), that time is that service's request's, and
// that request's own explanation (its CPU and line, who held its thread, waiting for a CPU) is
// carried up to the trace's first request, written there as one event (EventPath). Jaeger
// computes a critical path by time only; this one says why each hop took its time.

// maxTraceHops bounds the server and the client spans kept per trace (each): a GraphQL
// operation that fans out to 64 calls is past what a path of top_frames hops can show.
const maxTraceHops = 64

// maxPathDepth bounds how deep the path follows calls across services (a cycle of services
// calling each other stops there too).
const maxPathDepth = 8

// serverHop is a request one process served in the trace.
type serverHop struct {
	proc       procRef
	span       pcommon.SpanID
	parent     pcommon.SpanID
	start, end int64
	service    string
	route      string
	// What its own thread did (causeOf); "" until enriched.
	cause string
	// Enriched or passed on: nothing more will be known of it.
	settled bool
}

// clientCall is a call a process made in the trace (a client span: HTTP, fetch, gRPC, a
// database).
type clientCall struct {
	proc       procRef
	span       pcommon.SpanID
	start, end int64
	// Who it called, when no server span of the callee is seen: its peer's address, the
	// database system, else the span's name.
	peer string
}

// Attributes a client span names its peer by (semantic conventions, current and older).
var peerAttrs = []string{"server.address", "net.peer.name", "db.system.name", "db.system", "rpc.service"}

// noteHop keeps a server or client span of the trace for its path.
func (t *traceNames) noteHop(proc procRef, service string, s ptrace.Span) {
	st := profilestore.SpanTimesOf(s)
	switch s.Kind() {
	case ptrace.SpanKindServer:
		e := t.entry(s.TraceID())
		if len(e.servers) >= maxTraceHops || slices.ContainsFunc(e.servers, func(h *serverHop) bool { return h.span == st.Span }) {
			return
		}
		e.servers = append(e.servers, &serverHop{proc: proc, span: st.Span, parent: s.ParentSpanID(), start: st.Start, end: st.End, service: service, route: profiledict.Truncate(requestName(s))})
	case ptrace.SpanKindClient:
		e := t.entry(s.TraceID())
		if len(e.calls) >= maxTraceHops || slices.ContainsFunc(e.calls, func(c clientCall) bool { return c.span == st.Span }) {
			return
		}
		e.calls = append(e.calls, clientCall{proc: proc, span: st.Span, start: st.Start, end: st.End, peer: peerOf(s)})
	}
}

func peerOf(s ptrace.Span) string {
	attrs := s.Attributes()
	for _, k := range peerAttrs {
		if v := profilestore.StrAttr(attrs, k); v != "" {
			return profiledict.Truncate(v)
		}
	}
	for _, k := range urlAttrs {
		if u, err := url.Parse(profilestore.StrAttr(attrs, k)); err == nil && u.Host != "" {
			return profiledict.Truncate(u.Host)
		}
	}
	return profiledict.Truncate(s.Name())
}

func (e *traceEntry) server(span pcommon.SpanID) *serverHop {
	for _, h := range e.servers {
		if h.span == span {
			return h
		}
	}
	return nil
}

// settled records a request's route and cause once its span is enriched (cause != "") or
// passed on.
func (t *traceNames) settled(s ptrace.Span, cause string) {
	if s.Kind() != ptrace.SpanKindServer {
		return
	}
	e := t.traces[s.TraceID()]
	if e == nil {
		return
	}
	h := e.server(s.SpanID())
	if h == nil {
		return
	}
	h.settled = true
	if cause != "" {
		h.cause = cause
		h.route = profiledict.Truncate(requestName(s))
	}
}

// isFirstRequest says whether a server span is its trace's first request on this node: its
// parent is no call the node saw (a root, or called from outside).
func (e *traceEntry) isFirstRequest(s ptrace.Span) bool {
	if s.Kind() != ptrace.SpanKindServer {
		return false
	}
	parent := s.ParentSpanID()
	return parent.IsEmpty() || !slices.ContainsFunc(e.calls, func(c clientCall) bool { return c.span == parent })
}

// waitsForDownstream says whether a trace's first request should wait for its path: another
// process's request of the trace is held, not yet enriched.
func (t *traceNames) waitsForDownstream(s ptrace.Span, proc procRef) bool {
	e := t.traces[s.TraceID()]
	if e == nil || !e.isFirstRequest(s) {
		return false
	}
	return slices.ContainsFunc(e.servers, func(h *serverHop) bool { return h.proc != proc && !h.settled })
}

// pathHop is a hop of the path: a request's own time, or a wait on a call.
type pathHop struct {
	key   string
	ns    int64
	cause string
}

// pathOf is the path of a trace's first request s (served by proc) across the services the node
// saw, hops by key (a service's route, or a peer), heaviest first; nil when it called no other
// service the node saw, or s is not its trace's first request.
func (t *traceNames) pathOf(s ptrace.Span, proc procRef) []pathHop {
	e := t.traces[s.TraceID()]
	if e == nil || !e.isFirstRequest(s) || len(e.calls) == 0 {
		return nil
	}
	root := e.server(s.SpanID())
	if root == nil {
		return nil
	}
	byKey := map[string]*pathHop{}
	crossed := false
	e.walk(root, root.start, root.end, "", 0, byKey, &crossed)
	if !crossed {
		return nil
	}
	hops := make([]pathHop, 0, len(byKey))
	for _, h := range byKey {
		hops = append(hops, *h)
	}
	slices.SortFunc(hops, func(a, b pathHop) int {
		if c := cmp.Compare(b.ns, a.ns); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	return hops
}

// walk follows request h over [from, to] back from its end, as a critical path does: the call
// that ended last before the point reached is on the path, up to its start; the time between
// calls is h's own. Calls into a service the node saw are followed into that service's request.
func (e *traceEntry) walk(h *serverHop, from, to int64, prefix string, depth int, byKey map[string]*pathHop, crossed *bool) {
	var calls []clientCall
	for _, c := range e.calls {
		if c.proc == h.proc && c.end > from && c.start < to {
			calls = append(calls, c)
		}
	}
	slices.SortFunc(calls, func(a, b clientCall) int { return cmp.Compare(b.end, a.end) })
	cursor, own := to, int64(0)
	for _, c := range calls {
		if c.start >= cursor {
			continue
		}
		end := min(c.end, cursor)
		start := max(c.start, from)
		own += cursor - end
		cursor = start
		callee := e.calleeOf(c.span, h.proc)
		if callee == nil || depth >= maxPathDepth {
			add(byKey, "waiting on "+c.peer, end-start, "")
			continue
		}
		*crossed = true
		// The callee's request within the call; the rest of the call is the network and the
		// callee's queue before its span began.
		cs, ce := max(callee.start, start), min(callee.end, end)
		if ce > cs {
			e.walk(callee, cs, ce, "waiting on ", depth+1, byKey, crossed)
			add(byKey, "network to "+callee.service+" "+callee.route, (end-start)-(ce-cs), "")
		} else {
			add(byKey, "waiting on "+callee.service+" "+callee.route, end-start, "")
		}
	}
	own += cursor - from
	add(byKey, prefix+h.service+" "+h.route, own, h.cause)
}

// calleeOf is the request another process served for call span, nil when the node saw none.
func (e *traceEntry) calleeOf(span pcommon.SpanID, caller procRef) *serverHop {
	for _, h := range e.servers {
		if h.parent == span && h.proc != caller {
			return h
		}
	}
	return nil
}

func add(byKey map[string]*pathHop, key string, ns int64, cause string) {
	if ns <= 0 {
		return
	}
	h := byKey[key]
	if h == nil {
		h = &pathHop{key: key}
		byKey[key] = h
	}
	h.ns += ns
	if h.cause == "" {
		h.cause = cause
	}
}

// causeOf is what a request's own thread did, longest kind first, for its hop of a path: "cpu
// 20.0ms in recomputeStockLevels (inventory.js:13) 100%; waiting for a CPU 60.0ms; held by
// /report 5.0ms: render (report.js:9); blocked 3.0ms". Parts under 0.1 ms are left out; "no samples"
// when nothing is known.
func causeOf(j *profilestore.Joined, nameOf func(pcommon.TraceID) string) string {
	var c causeParts
	if j.CPUKnown() {
		// Its two hottest frames: at 99 Hz a 20 ms burst is two samples, and one of them in
		// another function ties the two (one frame would then name either, by its name).
		c.cpu(j.CPUTrace, strings.Join(percentages(j.Frames, 2), ", "))
	}
	if j.OffKnown() {
		c.runnable(j.Runnable)
		c.blocked(j.OffTrace)
	}
	var longest pcommon.TraceID
	var held, longestNs int64
	for id, h := range j.Others {
		held += h.NS
		if h.NS > longestNs || (h.NS == longestNs && string(id[:]) < string(longest[:])) {
			longest, longestNs = id, h.NS
		}
	}
	if held >= minHeldNs {
		h := j.Others[longest]
		c.held(held, holderName(h, longest, nameOf), topFrame(h))
	}
	return c.String()
}

// putPath writes the path as the EventPath event of the first request: its n heaviest hops,
// "<hop> <ms>ms: <cause>", and the rest as a count and their ms.
func putPath(span ptrace.Span, hops []pathHop, n int) {
	if len(hops) == 0 {
		return
	}
	ev := span.Events().AppendEmpty()
	ev.SetName(EventPath)
	ev.SetTimestamp(span.EndTimestamp())
	ea := ev.Attributes()
	listed := make([]string, 0, min(n, len(hops)))
	var othersNs int64
	for i, h := range hops {
		if i >= n {
			othersNs += h.ns
			continue
		}
		text := fmt.Sprintf("%s %.1fms", h.key, float64(h.ns)/1e6)
		if h.cause != "" {
			text += ": " + h.cause
		}
		listed = append(listed, text)
	}
	putStrings(ea, EventPathHops, listed)
	if len(hops) > n {
		ea.PutInt(EventPathOthers, int64(len(hops)-n))
		ea.PutDouble(EventPathOthersMs, float64(othersNs)/1e6)
	}
}
