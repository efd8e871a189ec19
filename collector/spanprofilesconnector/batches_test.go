// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// manySpans builds resources × scopes × spans, each span with a unique id (its index), an
// attribute of a size that varies with it, and its resource's and scope's names on it to check
// that it stays with them.
func manySpans(resources, scopes, spans int) ptrace.Traces {
	td := ptrace.NewTraces()
	n := 0
	for i := 0; i < resources; i++ {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", i))
		rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
		for j := 0; j < scopes; j++ {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(fmt.Sprintf("scope-%d", j))
			for k := 0; k < spans; k++ {
				s := ss.Spans().AppendEmpty()
				var id pcommon.SpanID
				binary.BigEndian.PutUint64(id[:], uint64(n+1))
				s.SetSpanID(id)
				s.SetTraceID(traceID(byte(n)))
				s.SetName("GET")
				s.Attributes().PutStr("where", fmt.Sprintf("svc-%d/scope-%d", i, j))
				s.Attributes().PutStr("padding", strings.Repeat("x", 50+(n*37)%900))
				n++
			}
		}
	}
	return td
}

// spanOrder lists the span ids of td in order, each checked to be under its own resource and scope.
func spanOrder(t *testing.T, td ptrace.Traces) []uint64 {
	var ids []uint64
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		svc, _ := rs.Resource().Attributes().Get("service.name")
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			require.Positive(t, spans.Len(), "no empty scope in a batch")
			for k := 0; k < spans.Len(); k++ {
				s := spans.At(k)
				where, _ := s.Attributes().Get("where")
				require.Equal(t, svc.Str()+"/"+ss.Scope().Name(), where.Str(), "a span stays with its resource and scope")
				id := s.SpanID()
				ids = append(ids, binary.BigEndian.Uint64(id[:]))
			}
		}
	}
	return ids
}

func TestSplitKeepsEverySpanWithinBounds(t *testing.T) {
	want := spanOrder(t, manySpans(3, 2, 400))
	for _, b := range []batchBounds{{spans: 100, bytes: 1 << 20}, {spans: 10_000, bytes: 64 << 10}, {spans: 7, bytes: 5_000}, {spans: 1, bytes: 1 << 20}} {
		t.Run(fmt.Sprintf("%d spans %d bytes", b.spans, b.bytes), func(t *testing.T) {
			batches := b.split(manySpans(3, 2, 400))
			var got []uint64
			for _, batch := range batches {
				assert.LessOrEqual(t, batch.SpanCount(), b.spans)
				assert.LessOrEqual(t, sizer.TracesSize(batch), b.bytes)
				got = append(got, spanOrder(t, batch)...)
			}
			assert.Equal(t, want, got, "every span once, in order")
			assert.Greater(t, len(batches), 1)
		})
	}
}

func TestSplitLeavesWhatFitsWhole(t *testing.T) {
	td := manySpans(2, 1, 10)
	batches := batchBounds{spans: 20, bytes: 1 << 20}.split(td)
	require.Len(t, batches, 1)
	assert.Equal(t, 20, batches[0].SpanCount())
}

// A span larger than the byte bound goes alone, not dropped and not stuck.
func TestSplitSendsAnOversizeSpanAlone(t *testing.T) {
	td := manySpans(1, 1, 3)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).Attributes().PutStr("padding", strings.Repeat("y", 100_000))
	batches := batchBounds{spans: 100, bytes: 10_000}.split(td)
	require.Len(t, batches, 3)
	for _, b := range batches {
		assert.Equal(t, 1, b.SpanCount())
	}
}

// A window that releases thousands of spans at once reaches the next consumer in batches within
// max_batch_spans and max_batch_bytes, every span enriched.
func TestReleasedSpansLeaveInBoundedBatches(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.MaxBatchSpans = 500
		c.MaxBatchBytes = 64 << 10
	})
	const requests, perRequest = 20, 200
	for r := 0; r < requests; r++ {
		td := traces(service(1))
		spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		for k := 0; k < perRequest; k++ {
			s := spans.AppendEmpty()
			var id pcommon.SpanID
			binary.BigEndian.PutUint64(id[:], uint64(r*perRequest+k+1))
			s.SetSpanID(id)
			s.SetTraceID(traceID(byte(k)))
			s.SetKind(ptrace.SpanKindServer)
			s.SetStartTimestamp(pcommon.Timestamp(ms(float64(k))))
			s.SetEndTimestamp(pcommon.Timestamp(ms(float64(k) + 5)))
			s.Attributes().PutInt("thread.id", 1)
		}
		h.sendTraces(td)
	}
	require.Zero(t, h.sink.SpanCount(), "the spans wait for their window")
	req := newRequest()
	req.window(agentProcess(1), 0, 1000).cpuAt(on{tid: 1, stack: req.stack(native("a"))}, 2, 300, 700)
	h.sendProfiles(req)
	assert.Equal(t, requests*perRequest, h.sink.SpanCount())
	assert.Greater(t, len(h.sink.AllTraces()), 1)
	for _, td := range h.sink.AllTraces() {
		assert.LessOrEqual(t, td.SpanCount(), 500)
		assert.LessOrEqual(t, sizer.TracesSize(td), 64<<10)
	}
	assert.Equal(t, int64(requests*perRequest), h.spans(spanEnriched))
}
