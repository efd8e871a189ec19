package spanprofilesconnector

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// tracesNamed is how many traces' names are remembered for `held_by`: at 4,000 requests/s
// (20 services x 200) the last 16 s of them, about 6 MiB.
const tracesNamed = 1 << 16

// traceNames remembers what the traces that passed are called (their route, else their entry
// span's name), so that `held_by` can name a trace whose samples carried no route. Bounded:
// the oldest is forgotten first.
type traceNames struct {
	names map[pcommon.TraceID]string
	ring  []pcommon.TraceID
	next  int
}

func newTraceNames(capacity int) *traceNames {
	return &traceNames{names: make(map[pcommon.TraceID]string, capacity), ring: make([]pcommon.TraceID, capacity)}
}

// note remembers the name of every request (a server span) in rs: its route, else its method
// and templated path, else its name (route.go). Roots that are not requests (a timer's
// dns.lookup) are not named: a holder is never listed under a name that is no route.
func (t *traceNames) note(rs ptrace.ResourceSpans) {
	sss := rs.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		spans := sss.At(i).Spans()
		for k := 0; k < spans.Len(); k++ {
			s := spans.At(k)
			if name := requestName(s); name != "" {
				t.put(s.TraceID(), truncate(name))
			}
		}
	}
}

func (t *traceNames) put(id pcommon.TraceID, name string) {
	if _, ok := t.names[id]; ok {
		t.names[id] = name
		return
	}
	if old := t.ring[t.next]; !old.IsEmpty() {
		delete(t.names, old)
	}
	t.ring[t.next] = id
	t.next = (t.next + 1) % len(t.ring)
	t.names[id] = name
}

func (t *traceNames) get(id pcommon.TraceID) string {
	return t.names[id]
}
