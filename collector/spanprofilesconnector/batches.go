// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"math/bits"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// batchBounds is the most one batch of spans sent on may hold: a count of spans and a size as
// OTLP protobuf. A whole agent window releases its spans at once (about 50,000 spans, 25 MB, at
// 1,000 requests/s and 10 s windows), and backends refuse large requests: Jaeger's OTLP gRPC
// receiver, like the Collector's, refuses messages over 4 MiB by default (ResourceExhausted), and
// the exporter then drops the whole batch.
type batchBounds struct {
	spans, bytes int
}

var sizer ptrace.ProtoMarshaler

// split cuts td into batches within the bounds, keeping each span with its resource and scope
// and the spans in order. It takes td's spans (td is empty afterwards unless it fit whole). A
// span larger than the byte bound on its own leaves in a batch of its own.
func (b batchBounds) split(td ptrace.Traces) []ptrace.Traces {
	if td.SpanCount() <= b.spans && sizer.TracesSize(td) <= b.bytes {
		return []ptrace.Traces{td}
	}
	var out []ptrace.Traces
	cur, curSpans, curBytes := ptrace.NewTraces(), 0, 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		sss := rs.ScopeSpans()
		// What a resource or scope costs in a batch besides its children: its own fields and
		// the tag and length in front of it (5 bytes of length at most: an upper bound).
		rsOwn := sizer.ResourceSpansSize(rs) + 1 + maxLengthBytes
		for j := 0; j < sss.Len(); j++ {
			rsOwn -= entrySize(sizer.ScopeSpansSize(sss.At(j)))
		}
		var curRS ptrace.ResourceSpans
		haveRS := false // curRS is rs's copy in cur
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			ssOwn := sizer.ScopeSpansSize(ss) + 1 + maxLengthBytes
			sizes := make([]int, spans.Len())
			for k := range sizes {
				sizes[k] = entrySize(sizer.SpanSize(spans.At(k)))
				ssOwn -= sizes[k]
			}
			var curSS ptrace.ScopeSpans
			haveSS := false
			for k := 0; k < spans.Len(); k++ {
				cost := sizes[k]
				if !haveSS {
					cost += ssOwn
				}
				if !haveRS {
					cost += rsOwn
				}
				if curSpans > 0 && (curSpans+1 > b.spans || curBytes+cost > b.bytes) {
					out = append(out, cur)
					cur, curSpans, curBytes = ptrace.NewTraces(), 0, 0
					haveRS, haveSS = false, false
					cost = sizes[k] + ssOwn + rsOwn
				}
				if !haveRS {
					curRS, haveRS = cur.ResourceSpans().AppendEmpty(), true
					rs.Resource().CopyTo(curRS.Resource())
					curRS.SetSchemaUrl(rs.SchemaUrl())
				}
				if !haveSS {
					curSS, haveSS = curRS.ScopeSpans().AppendEmpty(), true
					ss.Scope().CopyTo(curSS.Scope())
					curSS.SetSchemaUrl(ss.SchemaUrl())
				}
				spans.At(k).MoveTo(curSS.Spans().AppendEmpty())
				curSpans++
				curBytes += cost
			}
		}
	}
	if curSpans > 0 {
		out = append(out, cur)
	}
	return out
}

// A message's length is a varint: 5 bytes hold any length under 32 GiB.
const maxLengthBytes = 5

// entrySize is what a message of n bytes costs inside its parent: a tag byte, its length as a
// varint, itself.
func entrySize(n int) int {
	return 1 + (bits.Len64(uint64(n)|1)+6)/7 + n
}
