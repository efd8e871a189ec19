// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// The OpenTelemetry eBPF profiler as a recorded partner: what it sent, built from its
// thread-context pull request (#1229, 4905b24) and run host-wide against the end-to-end test's
// service under load, with the spans that service exported (testdata/ebpf-profiler/: capture.js
// made it, capture.json says what ran). The profiler sends each CPU sample as timestamps without
// values, its record attributes as `process.context.label.<key>`, and the process context it read
// as the resource; none of it is our encoder's.
const (
	ebpfProfilerProfiles = "testdata/ebpf-profiler/profiles.pb.gz"
	ebpfProfilerSpans    = "testdata/ebpf-profiler/spans.pb.gz"
	// The workload's CPU hog: 20-40 ms of synchronous work per /hog request.
	hogFunction = "hogCPU"
)

func replayEBPFProfiler(t *testing.T) (hog, wait []ptrace.Span) {
	t.Helper()
	for _, s := range spansOf(replay(t, recordedProfiles(t, ebpfProfilerProfiles), recordedTraces(t, ebpfProfilerSpans))) {
		if s.Kind() != ptrace.SpanKindServer {
			continue
		}
		switch route, _ := s.Attributes().Get("http.route"); route.AsString() {
		case "/hog":
			hog = append(hog, s)
		case "/wait":
			wait = append(wait, s)
		}
	}
	require.NotEmpty(t, hog, "the recording has /hog spans")
	require.NotEmpty(t, wait, "the recording has /wait spans")
	return hog, wait
}

// duration is a span's length in ms.
func duration(s ptrace.Span) float64 {
	return float64(s.EndTimestamp()-s.StartTimestamp()) / 1e6
}

// The recording is the profiler's shape, not our agent's, and what it read from outside is the
// service's own spans: every CPU sample is timestamps without values, the route arrives as
// process.context.label.http.route, the resource is the process context the service published,
// and every link names a span the service exported.
func TestEBPFProfilerRecordingIsThePartnersShape(t *testing.T) {
	spanIDs := map[pcommon.SpanID]bool{}
	for _, td := range recordedTraces(t, ebpfProfilerSpans) {
		forEachSpan(td, func(s ptrace.Span) { spanIDs[s.SpanID()] = true })
	}
	var samples, withValues, timestamps, linked, linkedToAnExportedSpan, routed int
	for _, pd := range recordedProfiles(t, ebpfProfilerProfiles) {
		d := profiledict.NewDictionary(pd.Dictionary())
		rps := pd.ResourceProfiles()
		for i := 0; i < rps.Len(); i++ {
			res := rps.At(i).Resource().Attributes().AsRaw()
			assert.Equal(t, "ebpf-profiler-capture", res["service.name"], "the resource is the process context the service published")
			assert.NotEmpty(t, res[profilestore.AttrServiceInstanceID])
			assert.NotEmpty(t, res[profilestore.AttrProcessPID])
			sps := rps.At(i).ScopeProfiles()
			for j := 0; j < sps.Len(); j++ {
				profiles := sps.At(j).Profiles()
				for k := 0; k < profiles.Len(); k++ {
					ss := profiles.At(k).Samples()
					for n := 0; n < ss.Len(); n++ {
						s := ss.At(n)
						samples++
						timestamps += s.TimestampsUnixNano().Len()
						if s.Values().Len() > 0 {
							withValues++
						}
						if s.LinkIndex() > 0 {
							linked += s.TimestampsUnixNano().Len()
							_, span, ok := d.Link(s.LinkIndex())
							if ok && spanIDs[span] {
								linkedToAnExportedSpan += s.TimestampsUnixNano().Len()
							}
						}
						for a := 0; a < s.AttributeIndices().Len(); a++ {
							if key, _, _ := d.Attribute(s.AttributeIndices().At(a)); key == "process.context.label.http.route" {
								routed += s.TimestampsUnixNano().Len()
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d samples, %d timestamps, %d linked to a span (%d to one the service exported), %d with a route label",
		samples, timestamps, linked, linkedToAnExportedSpan, routed)
	require.Positive(t, samples)
	assert.Zero(t, withValues, "the profiler sends timestamps without values")
	assert.Greater(t, linked, timestamps/2, "most of the busy service's samples ran inside a span")
	assert.Equal(t, linked, linkedToAnExportedSpan, "every link names a span the service exported")
	assert.Positive(t, routed, "record attributes arrive as process.context.label.<key>")
}
