// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"cmp"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// topFrame is the frame a holder held the thread in longest, on CPU and blocked together.
func topFrame(h *profilestore.Holder) string {
	byFrame := make(map[string]int64, len(h.Frames))
	for f, ns := range h.Frames {
		byFrame[f.Frame] += ns
	}
	if f := top(byFrame, 1); len(f) == 1 {
		return f[0].name
	}
	return profiledict.NoStack
}

// weighted is a frame (or trace) and its weight.
type weighted struct {
	name string
	w    int64
}

// top returns the n heaviest entries of m, heaviest first, ties by name.
func top(m map[string]int64, n int) []weighted {
	out := make([]weighted, 0, len(m))
	for k, v := range m {
		out = append(out, weighted{k, v})
	}
	slices.SortFunc(out, func(a, b weighted) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	return out[:min(n, len(out))]
}

// percentages renders the n heaviest frames of m as "frame NN%" (of m's total), as the
// summary of `thread-ctx report` does.
func percentages(m map[string]int64, n int) []string {
	var total int64
	for _, v := range m {
		total += v
	}
	if total <= 0 {
		return nil
	}
	var out []string
	for _, f := range top(m, n) {
		pct := 100 * float64(f.w) / float64(total)
		if pct < 0.5 {
			out = append(out, f.name+" <1%")
		} else {
			out = append(out, fmt.Sprintf("%s %.0f%%", f.name, pct))
		}
	}
	return out
}

// heldBy is who held the thread during a span: the traces that held it longest, each with
// its route, and every other trace as a remainder, so that listed and remainder add up to the
// time other requests held the thread (cpu.other_traces_ms + off_cpu.other_traces_ms); and the
// same time rolled up by route.
type heldBy struct {
	// "<route or span name> <trace id> <ms>ms: <top frame>", longest first.
	listed []string
	// The traces not listed, and their time.
	others   int
	othersNs int64
	// "<route> <ms>ms in <n> requests: <top frame>", longest first; past n routes, the rest
	// as one "(<k> other routes) ..." entry.
	routes []string
}

// holderName is the route a holder is listed under: the handler's route its samples carried
// most (a middleware's mount path `/` is no route), else its request's name (names.go: the
// route, templated path or name of its server span), else "(unknown)".
func holderName(h *profilestore.Holder, id pcommon.TraceID, nameOf func(pcommon.TraceID) string) string {
	if r := bestRoute(h.Routes); r != "" {
		return r
	}
	if who := nameOf(id); who != "" {
		return who
	}
	return "(unknown)"
}

// listHeldBy lists the n traces that held the thread longest, each at least minNs, and rolls all
// of them up by route (n routes at most, the rest as one entry).
func listHeldBy(j *profilestore.Joined, n int, minNs int64, nameOf func(pcommon.TraceID) string) heldBy {
	byTrace := make(map[string]int64, len(j.Others))
	ids := make(map[string]pcommon.TraceID, len(j.Others))
	type routeSum struct {
		ns     int64
		n      int
		frames map[string]int64
	}
	routes := map[string]*routeSum{}
	var total int64
	for id, h := range j.Others {
		total += h.NS
		name := holderName(h, id, nameOf)
		r := routes[name]
		if r == nil {
			r = &routeSum{frames: map[string]int64{}}
			routes[name] = r
		}
		r.ns += h.NS
		r.n++
		for f, ns := range h.Frames {
			r.frames[f.Frame] += ns
		}
		if h.NS < minNs {
			continue
		}
		k := id.String()
		byTrace[k] = h.NS
		ids[k] = id
	}
	var out heldBy
	var listedNs int64
	for _, t := range top(byTrace, n) {
		id := ids[t.name]
		h := j.Others[id]
		listedNs += h.NS
		out.listed = append(out.listed, fmt.Sprintf("%s %s %.1fms: %s", holderName(h, id, nameOf), t.name, float64(h.NS)/1e6, topFrame(h)))
	}
	out.others = len(j.Others) - len(out.listed)
	out.othersNs = total - listedNs
	byRoute := make(map[string]int64, len(routes))
	for name, r := range routes {
		byRoute[name] = r.ns
	}
	ranked := top(byRoute, len(byRoute))
	for i, t := range ranked {
		if i == n && len(ranked) > n+1 {
			var ns int64
			var reqs int
			for _, rest := range ranked[n:] {
				ns += rest.w
				reqs += routes[rest.name].n
			}
			out.routes = append(out.routes, fmt.Sprintf("(%d other routes) %.1fms in %d requests", len(ranked)-n, float64(ns)/1e6, reqs))
			break
		}
		r := routes[t.name]
		frame := profiledict.NoStack
		if f := top(r.frames, 1); len(f) == 1 {
			frame = f[0].name
		}
		out.routes = append(out.routes, fmt.Sprintf("%s %.1fms in %d requests: %s", t.name, float64(r.ns)/1e6, r.n, frame))
	}
	return out
}
