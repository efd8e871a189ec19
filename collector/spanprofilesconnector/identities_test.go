// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two services in PID namespaces of their own on one host, on the host's network: both pid 1,
// one host name, and (another SDK's wiring) no service.instance.id. service.name tells them
// apart where both sides carry it; samples of a span's trace are evidence of its process; a
// process matched before keeps its enrichment when a look-alike appears; what still cannot be
// told apart is logged once per resource, naming the candidates.
func TestProcessesThatLookAlike(t *testing.T) {
	h := newHarness(t, nil)
	st := r0stack()
	send := func(hostPID int64, name string, trace byte, at float64) {
		r := newRequest()
		w := r.window(agentProcess(hostPID, "process.vpid", int64(1), "service.name", name), at-100, at+900)
		w.cpuEvery(on{tid: hostPID, trace: trace, span: trace, stack: r.stack(st...)}, at, at+20)
		h.sendProfiles(r)
	}
	// koa alone first: its spans match it by pid and host.
	send(9101, "koa", 1, 100)
	h.sendTraces(traces(service(1, "service.name", "koa"), spanSpec{trace: 1, span: 1, start: 100, end: 160}))
	require.Contains(t, h.received(), spanID(1))
	assert.InDelta(t, 30.0, attrDouble(t, h.received()[spanID(1)], AttrCPUSpanMs), 1e-9)

	// hapi appears, same pid in its namespace, same host name, another service name.
	send(9202, "hapi", 2, 1100)
	send(9101, "koa", 3, 1100)
	h.sendTraces(traces(service(1, "service.name", "hapi"), spanSpec{trace: 2, span: 2, start: 1100, end: 1160}))
	h.sendTraces(traces(service(1, "service.name", "koa"), spanSpec{trace: 3, span: 3, start: 1100, end: 1160}))
	got := h.received()
	assert.InDelta(t, 30.0, attrDouble(t, got[spanID(2)], AttrCPUSpanMs), 1e-9, "hapi's by service.name")
	assert.InDelta(t, 30.0, attrDouble(t, got[spanID(3)], AttrCPUSpanMs), 1e-9, "koa keeps its enrichment")

	// Two replicas that nothing tells apart: a span with samples of its trace in one of them is
	// that one's; one without, of a resource matched before, stays with its process; one of a
	// resource never matched is not guessed, and the collision is logged once.
	send(9303, "twin", 4, 2100)
	send(9404, "twin", 5, 2100)
	h.sendTraces(traces(service(1, "service.name", "twin"), spanSpec{trace: 5, span: 5, start: 2100, end: 2160}))
	assert.InDelta(t, 30.0, attrDouble(t, h.received()[spanID(5)], AttrCPUSpanMs), 1e-9, "the evidence: its trace's samples")
	h.sendTraces(traces(service(1, "service.name", "twin", "host.name", "node-1"), spanSpec{trace: 6, span: 6, start: 2100, end: 2160}))
	h.sendTraces(traces(service(1, "service.name", "other-twin"), spanSpec{trace: 7, span: 7, start: 2100, end: 2160}))
	h.advance(h.c.cfg.MaxWait)
	got = h.received()
	tid, _ := threadOfSpan(t, got[spanID(6)])
	assert.Equal(t, int64(9404), tid, "bound before to the replica its evidence named")
	_, enriched := got[spanID(7)].Attributes().Get(AttrCPUSpanMs)
	assert.False(t, enriched)
	assert.Zero(t, h.spans(spanAmbiguousProcess), "other-twin: no process of that name")
	logged := h.logs.FilterMessageSnippet("cannot tell which process").All()
	assert.Empty(t, logged)

	anonymous := map[string]any{"host.name": "node-1", "process.pid": int64(1)}
	h.sendTraces(traces(anonymous, spanSpec{trace: 8, span: 8, start: 2100, end: 2160}))
	h.sendTraces(traces(anonymous, spanSpec{trace: 9, span: 9, start: 2100, end: 2160}))
	h.advance(h.c.cfg.MaxWait)
	assert.Equal(t, int64(2), h.spans(spanAmbiguousProcess))
	logged = h.logs.FilterMessageSnippet("cannot tell which process").All()
	require.Len(t, logged, 1, "once per resource")
	assert.Len(t, logged[0].ContextMap()["candidates"], 4)
	assert.Contains(t, logged[0].ContextMap()["candidates"], "host pid 9303, pid 1 in its PID namespace, service.name twin")
}

func r0stack() []frame { return []frame{js("work", "/a.js", 1)} }
