// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.uber.org/zap"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
)

// identity is what a resource says of the process it comes from.
type identity struct {
	instanceID string
	hostName   string
	// On spans: the pid the process sees itself as. On profiles: the same (process.vpid when
	// the agent saw the process in a PID namespace of its own, else process.pid).
	pid         int64
	containerID string
	// service.name, unless the SDK's placeholder (unknown_service:...), which names nothing.
	serviceName string
}

func identityOf(attrs pcommon.Map) identity {
	name := strAttr(attrs, attrServiceName)
	if strings.HasPrefix(name, "unknown_service") {
		name = ""
	}
	return identity{
		instanceID:  strAttr(attrs, attrServiceInstanceID),
		hostName:    strAttr(attrs, attrHostName),
		pid:         intAttr(attrs, attrProcessPID),
		containerID: strAttr(attrs, attrContainerID),
		serviceName: name,
	}
}

func strAttr(attrs pcommon.Map, k string) string {
	if v, ok := attrs.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

// intAttr reads a non-negative integer attribute, also from a decimal string (some SDKs and
// processors send pids as strings); 0 when absent or not a number.
func intAttr(attrs pcommon.Map, k string) int64 {
	v, ok := attrs.Get(k)
	if !ok {
		return 0
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return max(v.Int(), 0)
	case pcommon.ValueTypeStr:
		n, err := strconv.ParseInt(v.Str(), 10, 64)
		if err != nil {
			return 0
		}
		return max(n, 0)
	}
	return 0
}

// processKey tells the processes of a node apart as the agent sees them.
type processKey struct {
	hostName    string
	hostPID     int64
	containerID string
}

// process is one profiled process and its windows.
type process struct {
	key processKey
	id  identity
	// Sorted by start.
	windows []*window
}

// store holds the profile windows of a node's processes, bounded by max_processes, max_samples
// and retention.
type store struct {
	cfg      *Config
	tel      *telemetry
	refusals *refusalLog
	procs    map[processKey]*process
	// Lookups by what spans carry.
	byInstance map[string][]*process
	byPID      map[int64][]*process
	// Every window held, oldest arrival first: retention and max_samples drop from the front.
	arrivals []heldWindow
	held     int
}

type heldWindow struct {
	p *process
	w *window
}

func newStore(cfg *Config, tel *telemetry, logger *zap.Logger) *store {
	return &store{cfg: cfg, tel: tel, refusals: newRefusalLog(logger), procs: map[processKey]*process{}, byInstance: map[string][]*process{}, byPID: map[int64][]*process{}}
}

// ingest adds a request's profiles; returns the processes that got a window.
func (s *store) ingest(pd pprofile.Profiles, now time.Time) []*process {
	s.expire(now)
	dict := profiledict.NewDictionary(pd.Dictionary())
	var got []*process
	rps := pd.ResourceProfiles()
	for i := 0; i < rps.Len(); i++ {
		if p := s.add(dict, rps.At(i), now); p != nil && !slices.Contains(got, p) {
			got = append(got, p)
		}
	}
	s.publish()
	return got
}

// add adds one process's window; returns the process, or nil when the window was refused.
func (s *store) add(dict *profiledict.Dictionary, rp pprofile.ResourceProfiles, now time.Time) *process {
	attrs := rp.Resource().Attributes()
	id := identityOf(attrs)
	// The agent's process.pid is the host's; what the process's spans call it is process.vpid
	// when it runs in a PID namespace of its own.
	key := processKey{hostName: id.hostName, hostPID: id.pid, containerID: id.containerID}
	if vpid := intAttr(attrs, attrProcessVPID); vpid > 0 {
		id.pid = vpid
	}
	w, counts := windowOf(dict, rp, now, s.cfg.MaxSamples)
	if w == nil {
		s.tel.window(windowInvalid)
		s.tel.sample(sampleInvalid, counts.invalid)
		s.refusals.note(rp, map[string]int{refusedNoTime: max(counts.invalid, 1)})
		return nil
	}
	s.countSamples(counts)
	s.refusals.note(rp, map[string]int{
		sampleInvalid: counts.invalid, sampleUntimed: counts.untimed, sampleNoThread: counts.noThread,
		sampleUnsupported: counts.unsupported, sampleOverBound: counts.overBound,
	})
	if key.hostPID <= 0 {
		// Without a pid there is no main thread, and no span's resource can name the process.
		s.tel.window(windowInvalid)
		s.tel.sample(sampleInvalid, w.points)
		s.refusals.note(rp, map[string]int{refusedNoPID: max(w.points, 1)})
		return nil
	}
	if p := s.procs[key]; p != nil && slices.ContainsFunc(p.windows, func(o *window) bool { return o.start == w.start && o.end == w.end }) {
		// An exporter that retried a request the Collector had taken: counting it twice
		// would double every figure of the spans it covers.
		s.tel.window(windowDuplicate)
		s.tel.sample(sampleInvalid, w.points)
		return nil
	}
	s.makeRoom(w.points)
	p := s.process(key, id)
	if p == nil {
		s.tel.window(windowOverProcessBound)
		s.tel.sample(sampleOverBound, w.points)
		return nil
	}
	i, _ := slices.BinarySearchFunc(p.windows, w.start, func(o *window, t int64) int { return cmpInt(o.start, t) })
	p.windows = slices.Insert(p.windows, i, w)
	s.arrivals = append(s.arrivals, heldWindow{p, w})
	s.held += w.points
	s.tel.window(windowKept)
	return p
}

func (s *store) countSamples(c sampleCounts) {
	s.tel.sample(sampleKept, c.kept)
	s.tel.sample(sampleInvalid, c.invalid)
	s.tel.sample(sampleUntimed, c.untimed)
	s.tel.sample(sampleNoThread, c.noThread)
	s.tel.sample(sampleOverBound, c.overBound)
	s.tel.sample(sampleUnsupported, c.unsupported)
}

// process returns the process of key, made when new, its identity updated (a process
// republishes its context with its SDK's full resource after its first span); nil when
// max_processes are held and none can be forgotten.
func (s *store) process(key processKey, id identity) *process {
	p := s.procs[key]
	if p == nil {
		if len(s.procs) >= s.cfg.MaxProcesses && !s.forgetOldestProcess() {
			return nil
		}
		p = &process{key: key}
		s.procs[key] = p
	} else if p.id == id {
		return p
	} else {
		s.unindex(p)
	}
	p.id = id
	if id.instanceID != "" {
		s.byInstance[id.instanceID] = append(s.byInstance[id.instanceID], p)
	}
	s.byPID[id.pid] = append(s.byPID[id.pid], p)
	return p
}

func (s *store) unindex(p *process) {
	remove := func(ps []*process) []*process {
		return slices.DeleteFunc(ps, func(o *process) bool { return o == p })
	}
	if p.id.instanceID != "" {
		if s.byInstance[p.id.instanceID] = remove(s.byInstance[p.id.instanceID]); len(s.byInstance[p.id.instanceID]) == 0 {
			delete(s.byInstance, p.id.instanceID)
		}
	}
	if s.byPID[p.id.pid] = remove(s.byPID[p.id.pid]); len(s.byPID[p.id.pid]) == 0 {
		delete(s.byPID, p.id.pid)
	}
}

// forgetOldestProcess drops the process whose newest window arrived longest ago.
func (s *store) forgetOldestProcess() bool {
	var oldest *process
	var at time.Time
	for _, p := range s.procs {
		newest := time.Time{}
		for _, w := range p.windows {
			if w.received.After(newest) {
				newest = w.received
			}
		}
		if oldest == nil || newest.Before(at) {
			oldest, at = p, newest
		}
	}
	if oldest == nil {
		return false
	}
	for _, w := range oldest.windows {
		s.held -= w.points
		s.tel.window(windowEvicted)
		s.tel.sample(sampleEvictedOnDrop, w.points)
	}
	s.arrivals = slices.DeleteFunc(s.arrivals, func(h heldWindow) bool { return h.p == oldest })
	s.drop(oldest)
	return true
}

func (s *store) drop(p *process) {
	s.unindex(p)
	delete(s.procs, p.key)
}

// makeRoom drops the oldest windows until n more points fit in max_samples.
func (s *store) makeRoom(n int) {
	for s.held+n > s.cfg.MaxSamples && len(s.arrivals) > 0 {
		s.dropFront(windowEvicted)
	}
}

// expire drops the windows that arrived more than `retention` ago.
func (s *store) expire(now time.Time) {
	for len(s.arrivals) > 0 && now.Sub(s.arrivals[0].w.received) > s.cfg.Retention {
		s.dropFront(windowExpired)
	}
	s.publish()
}

func (s *store) dropFront(why string) {
	h := s.arrivals[0]
	s.arrivals[0] = heldWindow{}
	s.arrivals = s.arrivals[1:]
	h.p.windows = slices.DeleteFunc(h.p.windows, func(w *window) bool { return w == h.w })
	s.held -= h.w.points
	s.tel.window(why)
	if why == windowEvicted {
		s.tel.sample(sampleEvictedOnDrop, h.w.points)
	}
	if len(h.p.windows) == 0 {
		s.drop(h.p)
	}
}

func (s *store) publish() {
	s.tel.heldSamples.Store(int64(s.held))
	s.tel.processes.Store(int64(len(s.procs)))
}

// match finds the process a span's resource names: by service.instance.id first, else by pid
// narrowed by host.name, container.id, service.name and instance id where both sides carry
// them. Several candidates are never guessed between: they are returned for the caller to
// decide by evidence (connector.go).
func (s *store) match(id identity) (*process, string, []*process) {
	p, why := s.matchOne(id)
	if why != spanAmbiguousProcess {
		return p, why, nil
	}
	if s.instanceElsewhere(id) != nil {
		// No candidate: evidence (a copied trace id) must not join the spans to the instance's
		// real process either.
		return nil, why, nil
	}
	return nil, why, s.candidates(id)
}

// instanceElsewhere is the one profiled process that holds the span resource's
// service.instance.id while the resource's process.pid names another profiled process of the
// same host: the spans come from that other process, naming itself as another one's instance
// (a service.instance.id copied from a trace backend). Its spans are never joined to the
// instance's process: counted ambiguous_process, and said once (identities.logForged). A pid
// that names no profiled process does not count: a profiler that reports host pids only (the
// OpenTelemetry eBPF profiler) and a service in a container (pid 1 in its spans) are joined by
// the instance id alone.
func (s *store) instanceElsewhere(id identity) *process {
	if id.instanceID == "" || id.pid <= 0 {
		return nil
	}
	c := s.byInstance[id.instanceID]
	if len(c) != 1 || c[0].id.pid == id.pid {
		return nil
	}
	owner := c[0]
	for _, p := range s.byPID[id.pid] {
		if p != owner && p.id.pid == id.pid && !differ(id.hostName, p.id.hostName) && !differ(id.containerID, p.id.containerID) {
			return owner
		}
	}
	return nil
}

func (s *store) matchOne(id identity) (*process, string) {
	if id.instanceID == "" && id.pid <= 0 {
		return nil, spanNoProcessIdentity
	}
	if id.instanceID != "" {
		c := s.byInstance[id.instanceID]
		if len(c) > 1 && id.pid > 0 {
			c = filter(c, func(p *process) bool { return p.id.pid == id.pid })
		}
		switch len(c) {
		case 1:
			if s.instanceElsewhere(id) != nil {
				return nil, spanAmbiguousProcess
			}
			return c[0], ""
		case 0:
		default:
			return nil, spanAmbiguousProcess
		}
	}
	if id.pid <= 0 {
		return nil, spanNoProcess
	}
	c := s.candidates(id)
	switch len(c) {
	case 0:
		return nil, spanNoProcess
	case 1:
		return c[0], ""
	}
	return nil, spanAmbiguousProcess
}

// candidates are the processes of the span's pid that nothing the two resources say tells apart.
func (s *store) candidates(id identity) []*process {
	if id.instanceID != "" {
		if c := s.byInstance[id.instanceID]; len(c) > 1 {
			return c
		}
	}
	return filter(s.byPID[id.pid], func(p *process) bool {
		return !differ(id.hostName, p.id.hostName) && !differ(id.containerID, p.id.containerID) &&
			!differ(id.instanceID, p.id.instanceID) && !differ(id.serviceName, p.id.serviceName)
	})
}

// holdsTrace says whether the process's windows hold samples of trace: evidence that a span of
// that trace is the process's.
func (p *process) holdsTrace(trace pcommon.TraceID) bool {
	for _, w := range p.windows {
		if _, ok := w.traces[trace]; ok {
			return true
		}
	}
	return false
}

// differ says two resources name different things: both say it, and not the same.
func differ(a, b string) bool { return a != "" && b != "" && a != b }

func filter(ps []*process, keep func(*process) bool) []*process {
	var out []*process
	for _, p := range ps {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// coverage says whether a process's windows cover [start, end].
type coverage int

const (
	// Not yet: no window reaches the span's end.
	coverNotYet coverage = iota
	// Covered without a gap.
	coverFull
	// The windows reach past both ends but leave a gap inside: a window that has not arrived
	// (out of order), or one the agent did not send (it sends none for a process that had no
	// samples in a window).
	coverGap
	// The span begins before the earliest window held: the agent began tracking the process
	// later, that window expired, or it is still to come out of order.
	coverBefore
)

// covered is how much of [start, end] the process's windows cover (ns).
func (p *process) covered(start, end int64) int64 {
	var total int64
	reach := start
	for _, w := range p.windows {
		from, to := max(w.start, reach), min(w.end, end)
		if to > from {
			total += to - from
			reach = to
		}
	}
	return total
}

// reach is the end of the latest window held.
func (p *process) reach() int64 {
	r := int64(0)
	for _, w := range p.windows {
		r = max(r, w.end)
	}
	return r
}

func (p *process) coverage(start, end int64) coverage {
	if len(p.windows) == 0 {
		return coverNotYet
	}
	// The gap allowance bridges windows only: a span that ends even 1 ms past the latest
	// window may have samples in the next one.
	if start < p.windows[0].start {
		return coverBefore
	}
	if p.reach() < end {
		return coverNotYet
	}
	// Walk the windows in start order, merging those that touch, from the run that holds
	// the span's start: covered when that run reaches its end.
	var runEnd int64 = -1
	for _, w := range p.windows {
		switch {
		case runEnd < 0:
			if w.start <= start && start <= w.end {
				runEnd = w.end
			}
		case w.start <= runEnd+windowGapNs:
			runEnd = max(runEnd, w.end)
		default:
			return coverGap
		}
		if runEnd >= end {
			return coverFull
		}
	}
	return coverGap
}
