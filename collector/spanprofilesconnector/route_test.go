// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

func TestTemplatePathFoldsIDsNeverWords(t *testing.T) {
	for in, want := range map[string]string{
		"/users/42/orders?page=2":                            "/users/:id/orders",
		"/quote/SKU-12345":                                   "/quote/:id",
		"/api/v2/items/3f2a9c1e-8b7d-4e6f-a1b2-c3d4e5f6a7b8": "/api/v2/items/:id",
		"/price/abc":                                         "/price/abc",
		"/assets/html5/app.js#top":                           "/assets/html5/app.js",
		"":                                                   "/",
		"/":                                                  "/",
	} {
		assert.Equal(t, want, templatePath(in), in)
	}
}

// setAttrs sets string attributes on the span with id b of td.
func setAttrs(td ptrace.Traces, b byte, kv ...string) ptrace.Traces {
	forEachSpan(td, func(s ptrace.Span) {
		if s.SpanID()[0] == b {
			for i := 0; i+1 < len(kv); i += 2 {
				s.Attributes().PutStr(kv[i], kv[i+1])
			}
		}
	})
	return td
}

func routeOfSpan(s ptrace.Span) (string, string) {
	return profilestore.StrAttr(s.Attributes(), AttrRoute), profilestore.StrAttr(s.Attributes(), AttrRouteSource)
}

// A NestJS server span has no http.route and is named `GET`: it is named by the route its
// trace's samples carried on its thread (Nest's handler span sets http.route, which its record
// carries), else by its method and templated path (never the raw URL); the span says which.
// A span passed on unenriched (no profiles of its process) still gets its templated path.
func TestRoutesWhereTheFrameworkSetsNone(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	price := r.stack(js("computePrice", "/srv/app/compute-price.ts", 13))
	w.cpuEvery(on{tid: mainTID, trace: 1, span: 9, route: "/quote/:sku", stack: price}, 110, 130)
	w.cpuEvery(on{tid: mainTID, trace: 2, span: 2, stack: price}, 310, 320) // no route in its record
	h.sendProfiles(r)
	h.sendTraces(setAttrs(setAttrs(setAttrs(traces(service(mainTID),
		spanSpec{trace: 1, span: 1, start: 100, end: 200, name: "GET", server: true},
		spanSpec{trace: 2, span: 2, start: 300, end: 400, name: "GET", server: true},
		spanSpec{trace: 1, span: 3, start: 120, end: 125, name: "db"},
		spanSpec{trace: 4, span: 4, start: 500, end: 520, name: "GET", server: true},
	), 1, "http.request.method", "GET", "url.path", "/quote/SKU-1001"), 2, "http.method", "POST", "http.target", "/orders/77/items?x=1"), 4, "http.request.method", "GET", "url.path", "/quote/SKU-2002"))
	h.sendTraces(setAttrs(traces(service(9999), spanSpec{trace: 5, span: 5, start: 100, end: 200, name: "GET", server: true}),
		5, "http.request.method", "GET", "url.full", "http://shop:8080/users/42"))
	h.advance(h.c.cfg.MaxWait)
	got := h.received()
	route, src := routeOfSpan(got[spanID(1)])
	assert.Equal(t, [2]string{"/quote/:sku", routeFromSamples}, [2]string{route, src})
	route, src = routeOfSpan(got[spanID(4)])
	assert.Equal(t, [2]string{"/quote/:sku", routeFromSamples}, [2]string{route, src}, "no sample of its own: its siblings' samples")
	route, src = routeOfSpan(got[spanID(2)])
	assert.Equal(t, [2]string{"POST /orders/:id/items", routeFromPath}, [2]string{route, src})
	route, _ = routeOfSpan(got[spanID(3)])
	assert.Empty(t, route, "not a request: no route of its own")
	route, src = routeOfSpan(got[spanID(5)])
	assert.Equal(t, [2]string{"GET /users/:id", routeFromPath}, [2]string{route, src})
	_, enriched := got[spanID(5)].Attributes().Get(AttrSamples)
	assert.False(t, enriched)
}

// held_by lists routes, never a middleware's mount path `/` nor a root that is no request (a
// timer's dns.lookup), and never an entry under 0.1 ms.
func TestHeldByNamesRoutesOnly(t *testing.T) {
	h := newHarness(t, nil)
	r := newRequest()
	w := r.window(agentProcess(mainTID), 0, 1000)
	st := r.stack(js("hogCPU", "/srv/app/service.js", 24))
	parse := r.stack(js("jsonParser", "/srv/app/node_modules/body-parser/json.js", 90))
	// Trace 2: its body parser (route `/`), then its handler (/hog). Trace 3: only middleware
	// samples; its server span says /export. Trace 4: a timer's dns.lookup. Trace 6: 0.05 ms.
	w.cpuEvery(on{tid: mainTID, trace: 2, span: 20, route: "/", stack: parse}, 101, 121)
	w.cpuAt(on{tid: mainTID, trace: 2, span: 21, route: "/hog", stack: st}, 131)
	w.cpuEvery(on{tid: mainTID, trace: 3, span: 30, route: "/", stack: parse}, 141, 151)
	w.cpuAt(on{tid: mainTID, trace: 4, span: 4, stack: st}, 161)
	w.offCPU(on{tid: mainTID, trace: 6, span: 6, stack: st}, 171, 171.05)
	h.sendProfiles(r)
	h.sendTraces(traces(service(mainTID),
		spanSpec{trace: 3, span: 31, start: 90, end: 199, name: "POST /export", route: "/export", server: true},
		spanSpec{trace: 4, span: 4, start: 160, end: 162, name: "dns.lookup"},
	))
	td := traces(service(mainTID), spanSpec{trace: 1, span: 1, start: 100, end: 180, name: "GET /wait", route: "/wait", server: true})
	forEachSpan(td, func(s ptrace.Span) { s.SetParentSpanID(spanID(0)) })
	h.sendTraces(td)
	held := eventStrings(profileEvent(t, h.received()[spanID(1)]), EventHeldBy)
	assert.Equal(t, []string{
		"/hog 02020202020202020202020202020202 40.0ms: jsonParser (json.js:90)",
		"/export 03030303030303030303030303030303 20.0ms: jsonParser (json.js:90)",
		"(unknown) 04040404040404040404040404040404 10.0ms: hogCPU (service.js:24)",
	}, held)
}
