// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package waitmetrics

import (
	"cmp"
	"math"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Which lines of a route get a thread_ctx.wait.* series of their own: the heaviest, not the
// first seen. A GraphQL gateway's holder route runs hundreds of cheap resolver frames before its
// one hot line; naming the first max_functions lines seen put the hot line's 45 s under
// `other` beside 30 ms lines of their own.
//
// How it meets cumulative temporality: during a flush interval the waits are kept by their real
// line (m.interval, bounded by max_series). At the flush each holder route's lines are ranked by
// a space-saving summary of their inflicted ms (capacity hittersPerFunction x max_functions,
// decayed by half every minute so that yesterday's hot line yields to today's), the top
// max_functions are elected, and the interval's waits are added to the cumulative series: an
// elected line's own, the others' `other`. So:
//   - a line's series exists from the interval it was first elected in, and grows monotonically
//     while it stays elected; its StartTimestamp is the start of that interval;
//   - a line voted out is no longer sent (its series ends; Prometheus marks it stale), and one
//     elected again starts anew with a new StartTimestamp: a reset the backend sees as one;
//   - `other` of a route (per kind and delayed route) only grows: it is always sent.
// A line elected in the interval it first appears is in its own series from its first ms: the
// hot line is never in `other`, whenever it comes.

// hittersPerFunction: the summary holds this many candidates per elected line. Space-saving
// keeps every line whose share of the route's (decayed) inflicted time is above
// 1/(4 x max_functions): at the default 10 lines, every line above 2.5 %.
const hittersPerFunction = 4

// hittersHalfLife: the summary's counts halve every minute (scaled to the flush interval).
const hittersHalfLife = 60.0 // seconds

// heavyHitters is one holder route's summary and the lines elected from it.
type heavyHitters struct {
	counts map[string]*hitter
	named  map[string]bool
}

// hitter is one line's decayed ms in the summary: space-saving's count (a newcomer that replaces
// the smallest starts at its count) and that inherited part, its possible over-estimate. Lines
// are ranked by what they surely inflicted (count - over), so a newcomer does not outrank a
// line as heavy as itself by the luck of coming last.
type hitter struct {
	count, over float64
}

func (h *hitter) sure() float64 { return h.count - h.over }

// settleInterval adds the interval's waits to the cumulative series under the lines elected
// now, and starts a new interval at now.
func (m *Metrics) settleInterval(now pcommon.Timestamp) {
	if len(m.interval) == 0 {
		m.intervalStart = now
		return
	}
	// Each route's lines this interval, totalled over kind and delayed route.
	totals := map[routeKey]map[string]float64{}
	for k, ws := range m.interval {
		if k.function == Other {
			continue
		}
		rk := routeKey{k.service, k.route}
		if totals[rk] == nil {
			totals[rk] = map[string]float64{}
		}
		totals[rk][k.function] += ws.ms
	}
	seconds := float64(now-m.intervalStart) / 1e9
	decay := math.Pow(0.5, max(seconds, 0)/hittersHalfLife)
	demoted := map[routeKey][]string{}
	for rk, lines := range totals {
		hh := m.hitters[rk]
		if hh == nil {
			hh = &heavyHitters{counts: map[string]*hitter{}, named: map[string]bool{}}
			m.hitters[rk] = hh
		}
		if out := hh.elect(lines, decay, m.cfg.MaxFunctions); len(out) > 0 {
			demoted[rk] = out
		}
	}
	if len(demoted) > 0 {
		// Their series end here: a later election starts them anew.
		for k := range m.inflicted {
			if slices.Contains(demoted[routeKey{k.service, k.route}], k.function) {
				delete(m.inflicted, k)
			}
		}
	}
	for _, k := range sortedKeys(m.interval, cmpWaitKey) {
		p := m.interval[k]
		if k.function != Other && !m.hitters[routeKey{k.service, k.route}].named[k.function] {
			m.fold(MetricAttrFunction)
			k.function = Other
		}
		ws := m.inflicted[k]
		if ws == nil {
			if all := (waitKey{Other, Other, Other, k.kind, Other}); len(m.inflicted) >= m.cfg.MaxSeries && k != all {
				m.fold("series")
				k = all
				ws = m.inflicted[k]
			}
			if ws == nil {
				ws = &waitSeries{start: m.intervalStart}
				m.inflicted[k] = ws
			}
		}
		ws.ms += p.ms
		ws.delayed += p.delayed
		if ws.ex.Trace.IsEmpty() || p.ex.At >= ws.ex.At {
			ws.ex = p.ex
		}
	}
	clear(m.interval)
	m.intervalStart = now
}

// elect decays the summary, adds the interval's lines (heaviest first) space-saving style, and
// elects the top `seats`; it returns the lines voted out.
func (hh *heavyHitters) elect(lines map[string]float64, decay float64, seats int) []string {
	for _, h := range hh.counts {
		h.count *= decay
		h.over *= decay
	}
	capacity := hittersPerFunction * seats
	order := make([]string, 0, len(lines))
	for f := range lines {
		order = append(order, f)
	}
	slices.SortFunc(order, func(a, b string) int { return cmp.Or(cmp.Compare(lines[b], lines[a]), cmp.Compare(a, b)) })
	for _, f := range order {
		if h, ok := hh.counts[f]; ok {
			h.count += lines[f]
			continue
		}
		if len(hh.counts) < capacity {
			hh.counts[f] = &hitter{count: lines[f]}
			continue
		}
		// The smallest line not elected gives way (capacity is 4x the seats: there is one); an
		// elected line leaves the summary only after losing its seat.
		least, floor := "", math.Inf(1)
		for g, h := range hh.counts {
			if !hh.named[g] && (h.count < floor || (h.count == floor && g > least)) {
				least, floor = g, h.count
			}
		}
		delete(hh.counts, least)
		hh.counts[f] = &hitter{count: floor + lines[f], over: floor}
	}
	ranked := make([]string, 0, len(hh.counts))
	for f := range hh.counts {
		ranked = append(ranked, f)
	}
	// Heaviest first; on a tie the line that holds its seat keeps it, then by name.
	slices.SortFunc(ranked, func(a, b string) int {
		ha, hb := hh.counts[a], hh.counts[b]
		return cmp.Or(cmp.Compare(hb.sure(), ha.sure()), -cmpBool(hh.named[a], hh.named[b]), cmp.Compare(a, b))
	})
	elected := make(map[string]bool, seats)
	for _, f := range ranked[:min(seats, len(ranked))] {
		elected[f] = true
	}
	var out []string
	for f := range hh.named {
		if !elected[f] {
			out = append(out, f)
		}
	}
	hh.named = elected
	return out
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}
