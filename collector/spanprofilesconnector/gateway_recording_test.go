// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pprofiletest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/waitmetrics"
)

// testdata/gateway/: a GraphQL gateway's window and the requests it delayed, which the
// end-to-end test of the wait metrics posts to a Collector and reads back from Prometheus
// (__test__/e2e/wait-metrics-collectors.test.js). /graphql held the thread of 100 /wait requests:
// 80 of them 10 ms each in a resolver line of its own (80 cheap lines, which come first), 20 of
// them 60 ms each in its hot line, rankProducts (gateway.js:28). The hot line (1,200 ms) must have
// the top series, before `other` (the 71 cheap lines not elected, 710 ms). Regenerate with
//
//	UPDATE_GOLDEN=1 go test -C collector/spanprofilesconnector -run TestGatewayRecording
const gatewayDir = "testdata/gateway/"

const gatewayHotLine = "rankProducts (gateway.js:28)"

func gatewayRecording() (*request, ptrace.Traces) {
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 10_000)
	var specs []spanSpec
	for i := 0; i < 100; i++ {
		start := float64(100 * i)
		holder := on{tid: mainTID, trace: byte(101 + i), span: byte(101 + i), route: "/graphql"}
		if i < 80 {
			holder.stack = r.stack(js(fmt.Sprintf("resolve%d", i), "/srv/gateway/schema.js", int64(10+i)))
			w.cpuAt(holder, start+50)
		} else {
			holder.stack = r.stack(js("rankProducts", "/srv/gateway/gateway.js", 28))
			w.cpuAt(holder, start+20, start+30, start+40, start+50, start+60, start+70)
		}
		specs = append(specs, spanSpec{trace: byte(1 + i), span: byte(1 + i), start: start, end: start + 100, name: "POST /wait", route: "/wait", server: true})
	}
	return r, traces(service(mainTID), specs...)
}

func TestGatewayRecording(t *testing.T) {
	r, td := gatewayRecording()
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		pb, err := (&pprofile.ProtoMarshaler{}).MarshalProfiles(r.pd)
		require.NoError(t, err)
		writeRecording(t, gatewayDir+"profiles.pb", pb)
		tb, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		require.NoError(t, err)
		writeRecording(t, gatewayDir+"spans.pb", tb)
	}
	// The files are what this builds, field for field (the end-to-end test posts them as OTLP
	// protobuf; gatewayRecording is their readable source).
	got := recordedTraces(t, gatewayDir+"spans.pb")
	require.Len(t, got, 1)
	require.NoError(t, ptracetest.CompareTraces(td, got[0]))
	profiles := recordedProfiles(t, gatewayDir+"profiles.pb")
	require.Len(t, profiles, 1)
	require.NoError(t, pprofiletest.CompareProfiles(r.pd, profiles[0]))

	// And what the connector makes of them: the hot line on top.
	h := newMetricsHarness(t, nil)
	require.NoError(t, h.profiles.ConsumeProfiles(t.Context(), profiles[0]))
	h.sendTraces(got[0])
	require.Equal(t, int64(100), h.spans(spanEnriched))
	h.flush()
	type row struct {
		fn string
		ms float64
	}
	var rows []row
	for _, dp := range h.lastPoints(MetricWaitInflicted) {
		fn, _ := dp.Attributes().Get(MetricAttrFunction)
		rows = append(rows, row{fn.Str(), dp.DoubleValue()})
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.ms != b.ms {
			if a.ms > b.ms {
				return -1
			}
			return 1
		}
		return 0
	})
	require.Len(t, rows, 11, "10 lines and `other`")
	assert.Equal(t, row{gatewayHotLine, 1200}, rows[0])
	assert.Equal(t, row{waitmetrics.Other, 710}, rows[1])
	assert.Equal(t, int64(71), h.folds(MetricAttrFunction))
}

// writeRecording writes one message as a file exporter does: its size (4 bytes, big endian),
// then the message.
func writeRecording(t *testing.T, path string, msg []byte) {
	t.Helper()
	out := binary.BigEndian.AppendUint32(nil, uint32(len(msg)))
	require.NoError(t, os.WriteFile(path, append(out, msg...), 0o644))
}
