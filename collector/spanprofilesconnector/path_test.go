// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// Two services on one node, as issue 42 found them: a GraphQL gateway (every operation `POST
// /graphql`, no http.route) that calls an Express inventory service over fetch.
const (
	gatewayPID   = 100
	inventoryPID = 200
)

// hopSpec is a span of a trace that crossed services: its kind, parent and attributes.
type hopSpec struct {
	trace, span, parent byte
	kind                ptrace.SpanKind
	start, end          float64
	name                string
	attrs               map[string]any
}

func hopTraces(svc string, pid int64, specs ...hopSpec) ptrace.Traces {
	td := traces(service(pid, "service.name", svc))
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for _, sp := range specs {
		s := spans.AppendEmpty()
		s.SetTraceID(traceID(sp.trace))
		s.SetSpanID(spanID(sp.span))
		if sp.parent != 0 {
			s.SetParentSpanID(spanID(sp.parent))
		}
		s.SetKind(sp.kind)
		s.SetName(sp.name)
		s.SetStartTimestamp(pcommon.Timestamp(ms(sp.start)))
		s.SetEndTimestamp(pcommon.Timestamp(ms(sp.end)))
		if err := s.Attributes().FromRaw(sp.attrs); err != nil {
			panic(err)
		}
	}
	return td
}

var graphqlPost = map[string]any{"http.request.method": "POST", "url.path": "/graphql"}

func operation(typ, name string) map[string]any {
	m := map[string]any{"graphql.operation.type": typ}
	if name != "" {
		m["graphql.operation.name"] = name
	}
	return m
}

// gatewayRequest is one gateway request of trace tr: its server span (tr<<4|1), the GraphQL
// execute span (|2) and a fetch to inventory (|3) over [callFrom, callTo].
func gatewayRequest(tr byte, op map[string]any, start, end, callFrom, callTo float64) []hopSpec {
	return []hopSpec{
		{trace: tr, span: tr<<4 | 1, kind: ptrace.SpanKindServer, start: start, end: end, name: "POST", attrs: graphqlPost},
		{trace: tr, span: tr<<4 | 2, parent: tr<<4 | 1, kind: ptrace.SpanKindInternal, start: start + 1, end: end - 1, name: "graphql.execute", attrs: op},
		{trace: tr, span: tr<<4 | 3, parent: tr<<4 | 2, kind: ptrace.SpanKindClient, start: callFrom, end: callTo, name: "GET", attrs: map[string]any{"server.address": "inventory"}},
	}
}

// inventoryRequest is inventory's request of trace tr (tr<<4|4), called by the gateway's fetch.
func inventoryRequest(tr byte, route string, start, end float64) hopSpec {
	return hopSpec{trace: tr, span: tr<<4 | 4, parent: tr<<4 | 3, kind: ptrace.SpanKindServer, start: start, end: end, name: "GET " + route, attrs: map[string]any{"http.route": route}}
}

// sendAcrossServices sends two traces through both services, each holding the other's thread
// in one of them (TestTraceAcrossServices says how).
func sendAcrossServices(h *harness) { sendAcrossServicesTo(h, h) }

// sendAcrossServicesTo sends the gateway's spans and profiles to gwNode's Collector and
// inventory's to invNode's: one node when they are the same, two otherwise (pathwhole_test.go).
func sendAcrossServicesTo(gwNode, invNode *harness) {
	// Trace 1, query ProductPage: gateway 0-100 ms, its fetch 20-90, inventory's /stock/:sku
	// 25-85 (20 ms on CPU in recomputeStockLevels, 15 ms waiting for a CPU, 10 ms held by
	// trace 2). Trace 2, an anonymous query: gateway 1-200, its fetch 110-190, inventory's
	// /price/:sku 30-190 ms; its gateway work holds the gateway's thread 5-15 ms, in trace 1
	// (samples every 10 ms: each stands for 10 ms).
	gwNode.sendTraces(hopTraces("gateway", gatewayPID, append(gatewayRequest(1, operation("query", "ProductPage"), 0, 100, 20, 90),
		gatewayRequest(2, operation("query", ""), 1, 200, 110, 190)...)...))
	invNode.sendTraces(hopTraces("inventory", inventoryPID, inventoryRequest(1, "/stock/:sku", 25, 85), inventoryRequest(2, "/price/:sku", 30, 190)))

	rg, ri := newRequest(), newRequest()
	if gwNode == invNode {
		ri = rg
	}
	gw := rg.window(agentProcess(gatewayPID, "service.name", "gateway"), 0, 1000)
	inv := ri.window(agentProcess(inventoryPID, "service.name", "inventory"), 0, 1000)
	resolve := rg.stack(js("resolveProduct", "/srv/gateway.js", 30))
	hot := ri.stack(js("recomputeStockLevels", "/srv/inventory.js", 13))
	price := ri.stack(js("priceOf", "/srv/inventory.js", 40))
	// No sample carries a route (Apollo's server sets none; here Express's samples neither):
	// the names come from the spans alone.
	gw.cpuEvery(on{tid: gatewayPID, trace: 2, span: 2<<4 | 2, stack: resolve}, 5, 15)
	gw.cpuEvery(on{tid: gatewayPID, trace: 1, span: 1<<4 | 2, stack: resolve}, 92, 96)
	inv.cpuEvery(on{tid: inventoryPID, trace: 1, span: 1<<4 | 4, stack: hot}, 30, 49)
	inv.preempted(on{tid: inventoryPID, trace: 1, span: 1<<4 | 4, stack: hot}, 50, 65)
	inv.cpuEvery(on{tid: inventoryPID, trace: 2, span: 2<<4 | 4, stack: price}, 70, 79)
	if ri != rg {
		invNode.sendProfiles(ri)
	}
	gwNode.sendProfiles(rg)
}

// Two traces, each through both services, each holding the other's thread in one of them: a
// holder is named by what its trace did in the process it held, never by the route another
// service gave the same trace (issue 42: gateway spans "held by /stock/:sku"); a GraphQL
// operation is the gateway's route; and the gateway's request says it waited on inventory's,
// and why inventory's took its time.
func TestTraceAcrossServices(t *testing.T) {
	h := newHarness(t, nil)
	sendAcrossServices(h)

	got := h.received()
	gateway, stock := got[spanID(1<<4|1)], got[spanID(1<<4|4)]
	require.NotEqual(t, ptrace.Span{}, gateway)

	route, _ := gateway.Attributes().Get(AttrRoute)
	source, _ := gateway.Attributes().Get(AttrRouteSource)
	assert.Equal(t, "query ProductPage", route.AsString())
	assert.Equal(t, routeFromGraphQL, source.AsString())
	anon, _ := got[spanID(2<<4|1)].Attributes().Get(AttrRoute)
	assert.Equal(t, "query (anonymous)", anon.AsString())

	assert.Equal(t, []string{"query (anonymous) 02020202020202020202020202020202 20.0ms: resolveProduct (gateway.js:30)"},
		eventStrings(profileEvent(t, gateway), EventHeldBy), "the gateway's holder is named by the gateway's operation")
	assert.Equal(t, []string{"/price/:sku 02020202020202020202020202020202 10.0ms: priceOf (inventory.js:40)"},
		eventStrings(profileEvent(t, stock), EventHeldBy), "inventory's holder is named by inventory's route")

	path := pathEvent(t, gateway)
	hops := eventStrings(path, EventPathHops)
	require.NotEmpty(t, hops)
	assert.Equal(t, "waiting on inventory /stock/:sku 60.0ms: cpu 20.0ms in recomputeStockLevels (inventory.js:13) 100%; waiting for a CPU 15.0ms; held by /price/:sku 10.0ms: priceOf (inventory.js:40)", hops[0])
	assert.Contains(t, hops, "gateway query ProductPage 30.0ms: held by query (anonymous) 20.0ms: resolveProduct (gateway.js:30); cpu 10.0ms in resolveProduct (gateway.js:30) 100%")
	assert.Contains(t, hops, "network to inventory /stock/:sku 10.0ms")
	var total float64
	for _, hop := range hops {
		var v float64
		_, err := fmtSscanMs(hop, &v)
		require.NoError(t, err, hop)
		total += v
	}
	assert.InDelta(t, 100, total, 1e-6, "the hops add up to the first request's duration")
	_, onInventory := findEvent(stock, EventPath)
	assert.False(t, onInventory, "the path is written on the trace's first request only")
}

// A request that waits on a service whose span is queued behind it (its exporter sent it later)
// waits for that span's enrichment, so its path carries the cause.
func TestFirstRequestWaitsForItsCallees(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	r.window(agentProcess(gatewayPID, "service.name", "gateway"), 0, 1000).
		cpuEvery(on{tid: gatewayPID, trace: 1, span: 1<<4 | 2, stack: r.stack(js("resolve", "/srv/g.js", 1))}, 92, 96)
	r.window(agentProcess(inventoryPID, "service.name", "inventory"), 0, 1000).
		cpuEvery(on{tid: inventoryPID, trace: 1, span: 1<<4 | 4, stack: r.stack(js("recomputeStockLevels", "/srv/inventory.js", 13))}, 30, 49)
	h.sendTraces(hopTraces("gateway", gatewayPID, gatewayRequest(1, operation("query", "ProductPage"), 0, 100, 20, 90)...))
	h.sendTraces(hopTraces("inventory", inventoryPID, inventoryRequest(1, "/stock/:sku", 25, 85)))
	h.sendProfiles(r)
	hops := eventStrings(pathEvent(t, h.received()[spanID(1<<4|1)]), EventPathHops)
	require.NotEmpty(t, hops)
	assert.Contains(t, hops[0], "waiting on inventory /stock/:sku 60.0ms: cpu 20.0ms in recomputeStockLevels (inventory.js:13) 100%")
}

// A call into what the node saw no span of (a database) is a wait on its peer; a request that
// called no service the node saw has no path event.
func TestNoPathWithoutAServiceSeen(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	r.window(agentProcess(gatewayPID, "service.name", "gateway"), 0, 1000).
		cpuEvery(on{tid: gatewayPID, trace: 1, span: 1<<4 | 1, stack: r.stack(js("resolve", "/srv/g.js", 1))}, 92, 96)
	h.sendTraces(hopTraces("gateway", gatewayPID, gatewayRequest(1, operation("query", "ProductPage"), 0, 100, 20, 90)...))
	h.sendProfiles(r)
	_, ok := findEvent(h.received()[spanID(1<<4|1)], EventPath)
	assert.False(t, ok)
}

// GraphQL operation names are bounded: a type GraphQL does not have is "operation", a name cut.
func TestGraphQLOperationRoute(t *testing.T) {
	s := ptrace.NewSpan()
	assert.Empty(t, graphqlOperation(s))
	require.NoError(t, s.Attributes().FromRaw(map[string]any{"graphql.operation.type": "drop table", "graphql.operation.name": strings.Repeat("x", 1000)}))
	op := graphqlOperation(s)
	assert.True(t, strings.HasPrefix(op, "operation xxx"), op)
	assert.LessOrEqual(t, len(op), profiledict.MaxLabelBytes+len("…"))
}

func findEvent(s ptrace.Span, name string) (pcommon.Map, bool) {
	for i := 0; i < s.Events().Len(); i++ {
		if e := s.Events().At(i); e.Name() == name {
			return e.Attributes(), true
		}
	}
	return pcommon.Map{}, false
}

func pathEvent(t *testing.T, s ptrace.Span) pcommon.Map {
	m, ok := findEvent(s, EventPath)
	require.True(t, ok, "no %s event", EventPath)
	return m
}

// fmtSscanMs reads the "<ms>ms" of a hop (the number before the first "ms:" or the end).
func fmtSscanMs(hop string, v *float64) (int, error) {
	head, _, _ := strings.Cut(hop, "ms:")
	head = strings.TrimSuffix(head, "ms")
	fields := strings.Fields(head)
	return fmtSscan(fields[len(fields)-1], v)
}

func fmtSscan(s string, v *float64) (int, error) { return fmt.Sscan(s, v) }

// The path's cost on a trace's first request that called inventory 4 times (a ProductPage
// with its stock and price lookups for two products): noting its 14 spans as they arrive, and
// the walk at its enrichment. `go test -bench Path -run '^$'`.
func BenchmarkPath(b *testing.B) {
	var specs []hopSpec
	var inv []hopSpec
	specs = append(specs, gatewayRequest(1, operation("query", "ProductPage"), 0, 100, 10, 20)...)
	inv = append(inv, inventoryRequest(1, "/stock/:sku", 11, 19))
	for i := byte(0); i < 3; i++ {
		call := hopSpec{trace: 1, span: 0x30 + i, parent: 1<<4 | 2, kind: ptrace.SpanKindClient, start: 30 + 20*float64(i), end: 45 + 20*float64(i), name: "GET", attrs: map[string]any{"server.address": "inventory"}}
		specs = append(specs, call)
		inv = append(inv, hopSpec{trace: 1, span: 0x40 + i, parent: call.span, kind: ptrace.SpanKindServer, start: call.start + 1, end: call.end - 1, name: "GET /price/:sku", attrs: map[string]any{"http.route": "/price/:sku"}})
	}
	gw, in := hopTraces("gateway", gatewayPID, specs...), hopTraces("inventory", inventoryPID, inv...)
	root := gw.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	n := newTraceNames(tracesNamed)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		delete(n.traces, traceID(1))
		n.note(in.ResourceSpans().At(0))
		n.note(gw.ResourceSpans().At(0))
		for _, h := range n.traces[traceID(1)].servers {
			h.cause, h.settled = "cpu 20.0ms in recomputeStockLevels (inventory.js:13)", true
		}
		if len(n.pathOf(root, n.ref(profilestore.IdentityOf(gw.ResourceSpans().At(0).Resource().Attributes())))) == 0 {
			b.Fatal("no path")
		}
	}
}

// The wait metrics name a holder as the process it held calls it: the gateway's series name
// gateway operations, inventory's inventory routes, never each other's.
func TestWaitMetricsNameHoldersByTheirOwnService(t *testing.T) {
	h := newMetricsHarness(t, nil)
	sendAcrossServices(h.harness)
	h.flush()
	inflicted := h.lastPoints(MetricWaitInflicted)
	require.NotEmpty(t, inflicted)
	var keys []string
	for k := range inflicted {
		keys = append(keys, k)
	}
	// Each trace held the other's thread in both services.
	assert.ElementsMatch(t, []string{
		"service.name=gateway,http.route=query (anonymous),code.function=resolveProduct (gateway.js:30),kind=cpu,thread_ctx.delayed_route=query ProductPage",
		"service.name=gateway,http.route=query ProductPage,code.function=resolveProduct (gateway.js:30),kind=cpu,thread_ctx.delayed_route=query (anonymous)",
		"service.name=inventory,http.route=/price/:sku,code.function=priceOf (inventory.js:40),kind=cpu,thread_ctx.delayed_route=/stock/:sku",
		"service.name=inventory,http.route=/stock/:sku,code.function=recomputeStockLevels (inventory.js:13),kind=cpu,thread_ctx.delayed_route=/price/:sku",
	}, keys)
}
