// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// The Rust <-> Go contract, tied by golden files in testdata/agent/ (thread-ctx/otlp/tests/
// connector_contract.rs writes profiles.pb and spans.pb from `thread-ctx agent`'s encoder, and
// reads enriched.pb back as `thread-ctx report --traces` does, in the file exporter's framing):
// this test joins the agent's window with the workload's spans, checks what the connector
// answers, and compares its whole answer with enriched.yaml (pkg/golden, ptracetest), which a
// reviewer reads and diffs; enriched.pb holds the same spans for the Rust side. After a
// deliberate change of the contract, regenerate both with
//
//	UPDATE_GOLDEN=1 go test -C collector/spanprofilesconnector -run TestAgentGolden ./...
//
// and run the Rust side on it (the commands are at the top of connector_contract.rs).
const agentGolden = "testdata/agent/"

// The workload's ids (connector_contract.rs): a /hog request held the thread while /wait awaited.
var hogTrace = strings.Repeat("4b", 16)

func TestAgentGoldenJoin(t *testing.T) {
	out := replay(t, recordedProfiles(t, agentGolden+"profiles.pb"), recordedTraces(t, agentGolden+"spans.pb"))
	byRoute := map[string]ptrace.Span{}
	for _, s := range spansOf(out) {
		route, _ := s.Attributes().Get(profilestore.AttrHTTPRoute)
		byRoute[route.AsString()] = s
	}
	require.Len(t, byRoute, 3, "/hog, /wait and /alloc")

	hog := byRoute["/hog"]
	assert.Equal(t, 40.0, attrDouble(t, hog, AttrCPUSpanMs), "/hog: 4 CPU samples of 10 ms in its span")
	assert.Equal(t, int64(4), attrInt(t, hog, AttrSamples))
	assert.Equal(t, 5.0, attrDouble(t, hog, AttrOffCPURunnableMs), "/hog: preempted 5 ms")
	hogEvent := profileEvent(t, hog)
	assert.True(t, strings.HasPrefix(eventStrings(hogEvent, EventTopFrames)[0], "hogCPU (service.js:25)"), "%v", eventStrings(hogEvent, EventTopFrames))
	source, _ := hogEvent.Get(EventThreadSource)
	assert.Equal(t, profilestore.ThreadFromSpan, source.AsString())

	wait := byRoute["/wait"]
	assert.Equal(t, 20.0, attrDouble(t, wait, AttrCPUSpanMs), "/wait: its handler's 2 samples")
	assert.Equal(t, 40.0, attrDouble(t, wait, AttrCPUOtherTracesMs), "/wait: /hog's 4 samples on its thread")
	assert.Equal(t, 10.0, attrDouble(t, wait, AttrCPUNoSpanMs), "/wait: one GC sample")
	assert.Equal(t, 30.0, attrDouble(t, wait, AttrOffCPUNoSpanMs), "/wait: the loop asleep in epoll_wait")
	heldBy := eventStrings(profileEvent(t, wait), EventHeldBy)
	require.NotEmpty(t, heldBy)
	assert.True(t, strings.HasPrefix(heldBy[0], "/hog "+hogTrace), "the slowest /wait was held by /hog: %v", heldBy)

	alloc := byRoute["/alloc"]
	assert.Equal(t, int64(1_800_000), attrInt(t, alloc, AttrAllocBytes), "/alloc: 3 samples of 600 kB")
	assert.True(t, strings.HasPrefix(eventStrings(profileEvent(t, alloc), EventTopAllocFrames)[0], "allocateRows (service.js:32)"))

	enriched := goldenTraces(t, out)
	if os.Getenv("UPDATE_GOLDEN") != "" {
		require.NoError(t, golden.WriteTracesToFile(agentGolden+"enriched.yaml", enriched))
		msg, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(enriched)
		require.NoError(t, err)
		writeRecording(t, agentGolden+"enriched.pb", msg)
		return
	}
	want, err := golden.ReadTraces(agentGolden + "enriched.yaml")
	require.NoError(t, err)
	require.NoError(t, ptracetest.CompareTraces(want, enriched),
		"the connector's answer is not testdata/agent/enriched.yaml: if the change is meant, regenerate it (UPDATE_GOLDEN=1) and run thread-ctx/otlp/tests/connector_contract.rs on it")
}

// enriched.pb, which the Rust side reads, is enriched.yaml: the two cannot drift apart.
func TestAgentGoldenBinaryIsTheYAML(t *testing.T) {
	want, err := golden.ReadTraces(agentGolden + "enriched.yaml")
	require.NoError(t, err)
	framed := recordedTraces(t, agentGolden+"enriched.pb")
	require.Len(t, framed, 1)
	require.NoError(t, ptracetest.CompareTraces(want, framed[0]))
}

// goldenTraces puts the spans that left in one order whatever batches they left in: one
// ResourceSpans and ScopeSpans (the workload has one of each), spans by span id.
func goldenTraces(t *testing.T, out []ptrace.Traces) ptrace.Traces {
	t.Helper()
	spans := spansOf(out)
	sort.Slice(spans, func(i, j int) bool { return spans[i].SpanID().String() < spans[j].SpanID().String() })
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	require.NotEmpty(t, out)
	out[0].ResourceSpans().At(0).Resource().CopyTo(rs.Resource())
	ss := rs.ScopeSpans().AppendEmpty()
	for _, s := range spans {
		s.CopyTo(ss.Spans().AppendEmpty())
	}
	return td
}
