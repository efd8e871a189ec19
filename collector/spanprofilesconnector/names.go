// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// tracesNamed is how many traces are remembered for `held_by` and the path: at 4,000
// requests/s (20 services x 200) the last 16 s of them, about 6 MiB plus their calls.
const tracesNamed = 1 << 16

// processesNamed bounds the processes whose traces are named (a node runs tens); past it
// they are forgotten at once and named again as their spans come.
const processesNamed = 4_096

// procRef is a process as its spans' resource names it, interned: names and calls are kept per
// process, so that one trace that crossed services has one name per service instance.
type procRef uint32

// traceNames remembers, per trace and per process that did some of its work, what that work is
// called (its route, else its entry span's name; a GraphQL operation's name first), so that
// `held_by` names a trace whose samples carried no route by what it did in the holding
// process, never by another service's route; and the trace's requests and calls across
// processes (path.go). Bounded: the oldest trace is forgotten first.
type traceNames struct {
	traces map[pcommon.TraceID]*traceEntry
	ring   []pcommon.TraceID
	next   int
	procs  map[profilestore.Identity]procRef
}

// traceEntry is what the node's Collector saw of one trace.
type traceEntry struct {
	names []procName
	// Server spans and client spans, each process's (path.go); bounded by maxTraceHops.
	servers []*serverHop
	calls   []clientCall
}

// procName is one process's name for a trace.
type procName struct {
	proc procRef
	name string
	rank nameRank
}

// nameRank is how a name was told; a higher rank replaces a lower one: a GraphQL operation
// names its request over the templated path of its server span (every operation is `POST
// /graphql`), but not over an http.route the server span carries itself (the route stays one
// name everywhere: the wait metrics and latency histograms take http.route first).
type nameRank uint8

const (
	rankRequest nameRank = iota
	rankGraphQL
	rankOwnRoute
)

func newTraceNames(capacity int) *traceNames {
	return &traceNames{traces: make(map[pcommon.TraceID]*traceEntry, capacity), ring: make([]pcommon.TraceID, capacity), procs: map[profilestore.Identity]procRef{}}
}

// ref interns a process's identity.
func (t *traceNames) ref(id profilestore.Identity) procRef {
	if r, ok := t.procs[id]; ok {
		return r
	}
	if len(t.procs) >= processesNamed {
		clear(t.procs)
	}
	r := procRef(len(t.procs) + 1)
	t.procs[id] = r
	return r
}

// note remembers the name of every request (a server span) in rs under its process: its
// route, else its method and templated path, else its name (route.go); a GraphQL operation
// span names its process's request of that trace instead. Roots that are not requests (a
// timer's dns.lookup) are not named: a holder is never listed under a name that is no route.
// Server and client spans are kept for the trace's path (path.go).
func (t *traceNames) note(rs ptrace.ResourceSpans) {
	attrs := rs.Resource().Attributes()
	proc := t.ref(profilestore.IdentityOf(attrs))
	svc := profilestore.StrAttr(attrs, profilestore.AttrServiceName)
	sss := rs.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		spans := sss.At(i).Spans()
		for k := 0; k < spans.Len(); k++ {
			s := spans.At(k)
			if op := graphqlOperation(s); op != "" {
				t.entry(s.TraceID()).put(proc, op, rankGraphQL)
			} else if name := requestName(s); name != "" {
				rank := rankRequest
				if r := ownRoute(s); r != "" && !isMountRoute(r) {
					rank = rankOwnRoute
				}
				t.entry(s.TraceID()).put(proc, profiledict.Truncate(name), rank)
			}
			t.noteHop(proc, svc, s)
		}
	}
}

// entry returns the trace's entry, made when new (forgetting the oldest trace past capacity).
func (t *traceNames) entry(id pcommon.TraceID) *traceEntry {
	if e := t.traces[id]; e != nil {
		return e
	}
	if old := t.ring[t.next]; !old.IsEmpty() {
		delete(t.traces, old)
	}
	t.ring[t.next] = id
	t.next = (t.next + 1) % len(t.ring)
	e := &traceEntry{}
	t.traces[id] = e
	return e
}

// put sets the process's name for the trace, unless it has one of a higher rank.
func (e *traceEntry) put(proc procRef, name string, rank nameRank) {
	for i := range e.names {
		if n := &e.names[i]; n.proc == proc {
			if rank >= n.rank {
				n.name, n.rank = name, rank
			}
			return
		}
	}
	if len(e.names) < maxTraceHops {
		e.names = append(e.names, procName{proc, name, rank})
	}
}

func (t *traceNames) find(id pcommon.TraceID, proc procRef) (procName, bool) {
	if e := t.traces[id]; e != nil {
		for _, n := range e.names {
			if n.proc == proc {
				return n, true
			}
		}
	}
	return procName{}, false
}

// get is what the process calls the trace: "" when it has no name there.
func (t *traceNames) get(id pcommon.TraceID, proc procRef) string {
	n, _ := t.find(id, proc)
	return n.name
}

// operation is the GraphQL operation the process served in the trace, "" when none.
func (t *traceNames) operation(id pcommon.TraceID, proc procRef) string {
	if n, ok := t.find(id, proc); ok && n.rank == rankGraphQL {
		return n.name
	}
	return ""
}

// in returns the lookup of the names a process gave its traces, as held_by and the wait
// metrics take it.
func (t *traceNames) in(proc procRef) func(pcommon.TraceID) string {
	return func(id pcommon.TraceID) string { return t.get(id, proc) }
}
