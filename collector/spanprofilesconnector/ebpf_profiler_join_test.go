// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The connector's answers on the eBPF profiler's recording (ebpf_profiler_test.go says what it
// is): named results a user of that profiler would check by hand.

func TestEBPFProfilerHogSpansNameTheirFunctionFirst(t *testing.T) {
	hog, _ := replayEBPFProfiler(t)
	sampled, first := 0, 0
	for _, s := range hog {
		// Spans with samples of their own: a /hog request that never ran while the profiler
		// sampled (20-40 ms against a 10 ms period, on a busy machine) has none.
		if own, ok := s.Attributes().Get(AttrCPUSpanMs); !ok || own.Double() == 0 {
			continue
		}
		sampled++
		top := eventStrings(profileEvent(t, s), EventTopFrames)
		if len(top) > 0 && strings.HasPrefix(top[0], hogFunction+" ") {
			first++
		}
	}
	// Recorded: most /hog requests got at least one of the profiler's samples at 100 Hz
	// (docs/interoperability.md has the figures of this recording).
	require.GreaterOrEqual(t, sampled, len(hog)/2, "of %d /hog spans, %d have CPU of their own", len(hog), sampled)
	t.Logf("%s first in %d of %d /hog spans with CPU of their own (%d /hog spans)", hogFunction, first, sampled, len(hog))
	assert.GreaterOrEqual(t, float64(first), 0.9*float64(sampled),
		"%s first in top_frames of %d of the %d /hog spans with samples", hogFunction, first, sampled)
}

func TestEBPFProfilerSlowestWaitIsHeldByHog(t *testing.T) {
	_, wait := replayEBPFProfiler(t)
	sort.Slice(wait, func(i, j int) bool { return duration(wait[i]) > duration(wait[j]) })
	slowest := wait[0]
	heldBy := eventStrings(profileEvent(t, slowest), EventHeldBy)
	require.NotEmpty(t, heldBy, "the slowest /wait (%.1f ms) says who held its thread", duration(slowest))
	t.Logf("the slowest of %d /wait spans, %.1f ms: held_by %q, by route %q", len(wait), duration(slowest), heldBy[0],
		eventStrings(profileEvent(t, slowest), EventHeldByRoutes))
	assert.True(t, strings.HasPrefix(heldBy[0], "/hog "), "the slowest /wait was held by /hog: %q", heldBy)
	assert.Contains(t, heldBy[0], hogFunction, "and held_by names the hog's function")
	byRoute := eventStrings(profileEvent(t, slowest), EventHeldByRoutes)
	assert.True(t, len(byRoute) > 0 && strings.HasPrefix(byRoute[0], "/hog "), "and /hog is the route that held it longest: %q", byRoute)
}
