// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanpathprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
)

func TestConfig(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, "span_path", f.Type().String())
	cfg := f.CreateDefaultConfig().(*Config)
	require.NoError(t, cfg.Validate())
	cfg.TopFrames = 0
	assert.EqualError(t, cfg.Validate(), "top_frames is 0: expected 1 to 50")
}

// A trace through the processor: its path is written (spanprofilesconnector's pathwhole_test.go
// tests what it says) and the trace passed on. The gateway's request called inventory, whose
// request the batch holds: the path says it waited on it.
func TestWritesThePathAndPassesTheTraceOn(t *testing.T) {
	f := NewFactory()
	sink := &consumertest.TracesSink{}
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })

	td := ptrace.NewTraces()
	span := func(svc string, pid int64, id, parent byte, kind ptrace.SpanKind, start, end uint64, attrs map[string]any) {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc)
		rs.Resource().Attributes().PutInt("process.pid", pid)
		s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		s.SetTraceID([16]byte{1})
		s.SetSpanID([8]byte{id})
		if parent != 0 {
			s.SetParentSpanID([8]byte{parent})
		}
		s.SetKind(kind)
		s.SetStartTimestamp(pcommon.Timestamp((1000 + start) * 1e6))
		s.SetEndTimestamp(pcommon.Timestamp((1000 + end) * 1e6))
		require.NoError(t, s.Attributes().FromRaw(attrs))
	}
	span("gateway", 1, 1, 0, ptrace.SpanKindServer, 0, 100, map[string]any{"http.route": "/graphql"})
	span("gateway", 1, 2, 1, ptrace.SpanKindClient, 10, 90, map[string]any{"server.address": "inventory"})
	span("inventory", 2, 3, 2, ptrace.SpanKindServer, 20, 80, map[string]any{"http.route": "/stock/:sku"})
	require.NoError(t, p.ConsumeTraces(context.Background(), td))

	require.Len(t, sink.AllTraces(), 1)
	root := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	require.Equal(t, 1, root.Events().Len())
	ev := root.Events().At(0)
	assert.Equal(t, "thread_ctx.path", ev.Name())
	hops, ok := ev.Attributes().Get("hops")
	require.True(t, ok)
	assert.Equal(t, "waiting on inventory /stock/:sku 60.0ms", hops.Slice().At(0).AsString())
}
