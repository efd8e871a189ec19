// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

// Package profilestore holds the profile windows the span_profiles connector joins spans with:
// it reads each profiles request into one window per process (each sample's time, thread, span
// link and top frame), keeps the windows within max_samples, max_processes and retention, finds
// the process a span's resource names, and joins a span with that process's windows into what
// the span's thread did (Joined). The connector counts what it refuses through Telemetry and
// never reads a window itself.
package profilestore // import "github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"

import (
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.uber.org/zap"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
)

// processKey tells the processes of a node apart as the agent sees them.
type processKey struct {
	hostName    string
	hostPID     int64
	containerID string
}

// Process is one profiled process and its windows.
type Process struct {
	key processKey
	id  Identity
	// Sorted by start.
	windows []*window
}

// Store holds the profile windows of a node's processes, bounded by max_processes, max_samples
// and retention.
type Store struct {
	cfg      Bounds
	tel      Telemetry
	refusals *refusalLog
	procs    map[processKey]*Process
	// Lookups by what spans carry.
	byInstance map[string][]*Process
	byPID      map[int64][]*Process
	// Every window held, oldest arrival first: retention and max_samples drop from the front.
	arrivals []heldWindow
	held     int
}

type heldWindow struct {
	p *Process
	w *window
}

// Bounds are the store's limits (the connector's max_samples, max_processes and retention).
type Bounds struct {
	MaxSamples, MaxProcesses int
	Retention                time.Duration
}

// Telemetry counts what became of windows and samples (their outcome, outcomes.go) and is told
// what the store holds after each change.
type Telemetry interface {
	Window(outcome string)
	Samples(outcome string, n int)
	Held(samples, processes int)
}

// What Match says when it finds no one process.
const (
	NoProcess         = "no_process"          // no profiles of its process arrived within max_wait
	AmbiguousProcess  = "ambiguous_process"   // several processes fit its resource
	NoProcessIdentity = "no_process_identity" // its resource has neither service.instance.id nor process.pid
)

// New makes an empty store; logger says once per resource and reason why samples were refused.
func New(cfg Bounds, tel Telemetry, logger *zap.Logger) *Store {
	return &Store{cfg: cfg, tel: tel, refusals: newRefusalLog(logger), procs: map[processKey]*Process{}, byInstance: map[string][]*Process{}, byPID: map[int64][]*Process{}}
}

// Ingest adds a request's profiles; returns the processes that got a window.
func (s *Store) Ingest(pd pprofile.Profiles, now time.Time) []*Process {
	s.Expire(now)
	dict := profiledict.NewDictionary(pd.Dictionary())
	var got []*Process
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
func (s *Store) add(dict *profiledict.Dictionary, rp pprofile.ResourceProfiles, now time.Time) *Process {
	attrs := rp.Resource().Attributes()
	id := IdentityOf(attrs)
	// The agent's process.pid is the host's; what the process's spans call it is process.vpid
	// when it runs in a PID namespace of its own.
	key := processKey{hostName: id.HostName, hostPID: id.PID, containerID: id.ContainerID}
	if vpid := IntAttr(attrs, attrProcessVPID); vpid > 0 {
		id.PID = vpid
	}
	w, counts := windowOf(dict, rp, now, s.cfg.MaxSamples)
	if w == nil {
		s.tel.Window(WindowInvalid)
		s.tel.Samples(SampleInvalid, counts.invalid)
		s.refusals.note(rp, map[string]int{refusedNoTime: max(counts.invalid, 1)})
		return nil
	}
	s.countSamples(counts)
	s.refusals.note(rp, map[string]int{
		SampleInvalid: counts.invalid, SampleUntimed: counts.untimed, SampleNoThread: counts.noThread,
		SampleUnsupported: counts.unsupported, SampleOverBound: counts.overBound,
	})
	if key.hostPID <= 0 {
		// Without a pid there is no main thread, and no span's resource can name the process.
		s.tel.Window(WindowInvalid)
		s.tel.Samples(SampleInvalid, w.points)
		s.refusals.note(rp, map[string]int{refusedNoPID: max(w.points, 1)})
		return nil
	}
	if p := s.procs[key]; p != nil && slices.ContainsFunc(p.windows, func(o *window) bool { return o.start == w.start && o.end == w.end }) {
		// An exporter that retried a request the Collector had taken: counting it twice
		// would double every figure of the spans it covers.
		s.tel.Window(WindowDuplicate)
		s.tel.Samples(SampleInvalid, w.points)
		return nil
	}
	s.makeRoom(w.points)
	p := s.process(key, id)
	if p == nil {
		s.tel.Window(WindowOverProcessBound)
		s.tel.Samples(SampleOverBound, w.points)
		return nil
	}
	i, _ := slices.BinarySearchFunc(p.windows, w.start, func(o *window, t int64) int { return cmpInt(o.start, t) })
	p.windows = slices.Insert(p.windows, i, w)
	s.arrivals = append(s.arrivals, heldWindow{p, w})
	s.held += w.points
	s.tel.Window(WindowKept)
	return p
}

func (s *Store) countSamples(c sampleCounts) {
	s.tel.Samples(SampleKept, c.kept)
	s.tel.Samples(SampleInvalid, c.invalid)
	s.tel.Samples(SampleUntimed, c.untimed)
	s.tel.Samples(SampleNoThread, c.noThread)
	s.tel.Samples(SampleOverBound, c.overBound)
	s.tel.Samples(SampleUnsupported, c.unsupported)
}

// process returns the process of key, made when new, its identity updated (a process
// republishes its context with its SDK's full resource after its first span); nil when
// max_processes are held and none can be forgotten.
func (s *Store) process(key processKey, id Identity) *Process {
	p := s.procs[key]
	if p == nil {
		if len(s.procs) >= s.cfg.MaxProcesses && !s.forgetOldestProcess() {
			return nil
		}
		p = &Process{key: key}
		s.procs[key] = p
	} else if p.id == id {
		return p
	} else {
		s.unindex(p)
	}
	p.id = id
	if id.InstanceID != "" {
		s.byInstance[id.InstanceID] = append(s.byInstance[id.InstanceID], p)
	}
	s.byPID[id.PID] = append(s.byPID[id.PID], p)
	return p
}

func (s *Store) unindex(p *Process) {
	remove := func(ps []*Process) []*Process {
		return slices.DeleteFunc(ps, func(o *Process) bool { return o == p })
	}
	if p.id.InstanceID != "" {
		if s.byInstance[p.id.InstanceID] = remove(s.byInstance[p.id.InstanceID]); len(s.byInstance[p.id.InstanceID]) == 0 {
			delete(s.byInstance, p.id.InstanceID)
		}
	}
	if s.byPID[p.id.PID] = remove(s.byPID[p.id.PID]); len(s.byPID[p.id.PID]) == 0 {
		delete(s.byPID, p.id.PID)
	}
}

// forgetOldestProcess drops the process whose newest window arrived longest ago.
func (s *Store) forgetOldestProcess() bool {
	var oldest *Process
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
		s.tel.Window(WindowEvicted)
		s.tel.Samples(SampleEvictedOnDrop, w.points)
	}
	s.arrivals = slices.DeleteFunc(s.arrivals, func(h heldWindow) bool { return h.p == oldest })
	s.drop(oldest)
	return true
}

func (s *Store) drop(p *Process) {
	s.unindex(p)
	delete(s.procs, p.key)
}

// makeRoom drops the oldest windows until n more points fit in max_samples.
func (s *Store) makeRoom(n int) {
	for s.held+n > s.cfg.MaxSamples && len(s.arrivals) > 0 {
		s.dropFront(WindowEvicted)
	}
}

// Expire drops the windows that arrived more than `retention` ago.
func (s *Store) Expire(now time.Time) {
	for len(s.arrivals) > 0 && now.Sub(s.arrivals[0].w.received) > s.cfg.Retention {
		s.dropFront(WindowExpired)
	}
	s.publish()
}

func (s *Store) dropFront(why string) {
	h := s.arrivals[0]
	s.arrivals[0] = heldWindow{}
	s.arrivals = s.arrivals[1:]
	h.p.windows = slices.DeleteFunc(h.p.windows, func(w *window) bool { return w == h.w })
	s.held -= h.w.points
	s.tel.Window(why)
	if why == WindowEvicted {
		s.tel.Samples(SampleEvictedOnDrop, h.w.points)
	}
	if len(h.p.windows) == 0 {
		s.drop(h.p)
	}
}

func (s *Store) publish() {
	s.tel.Held(s.held, len(s.procs))
}

// Match finds the process a span's resource names: by service.instance.id first, else by pid
// narrowed by host.name, container.id, service.name and instance id where both sides carry
// them. Several candidates are never guessed between: they are returned for the caller to
// decide by evidence (the connector, by the traces their windows hold).
func (s *Store) Match(id Identity) (*Process, string, []*Process) {
	p, why := s.matchOne(id)
	if why != AmbiguousProcess {
		return p, why, nil
	}
	if s.InstanceElsewhere(id) != nil {
		// No candidate: evidence (a copied trace id) must not join the spans to the instance's
		// real process either.
		return nil, why, nil
	}
	return nil, why, s.candidates(id)
}

// InstanceElsewhere is the one profiled process that holds the span resource's
// service.instance.id while the resource's process.pid names another profiled process of the
// same host: the spans come from that other process, naming itself as another one's instance
// (a service.instance.id copied from a trace backend). Its spans are never joined to the
// instance's process: counted ambiguous_process, and said once (the connector logs it). A pid
// that names no profiled process does not count: a profiler that reports host pids only (the
// OpenTelemetry eBPF profiler) and a service in a container (pid 1 in its spans) are joined by
// the instance id alone.
func (s *Store) InstanceElsewhere(id Identity) *Process {
	if id.InstanceID == "" || id.PID <= 0 {
		return nil
	}
	c := s.byInstance[id.InstanceID]
	if len(c) != 1 || c[0].id.PID == id.PID {
		return nil
	}
	owner := c[0]
	for _, p := range s.byPID[id.PID] {
		if p != owner && p.id.PID == id.PID && !differ(id.HostName, p.id.HostName) && !differ(id.ContainerID, p.id.ContainerID) {
			return owner
		}
	}
	return nil
}

func (s *Store) matchOne(id Identity) (*Process, string) {
	if id.InstanceID == "" && id.PID <= 0 {
		return nil, NoProcessIdentity
	}
	if id.InstanceID != "" {
		c := s.byInstance[id.InstanceID]
		if len(c) > 1 && id.PID > 0 {
			c = filter(c, func(p *Process) bool { return p.id.PID == id.PID })
		}
		switch len(c) {
		case 1:
			if s.InstanceElsewhere(id) != nil {
				return nil, AmbiguousProcess
			}
			return c[0], ""
		case 0:
		default:
			return nil, AmbiguousProcess
		}
	}
	if id.PID <= 0 {
		return nil, NoProcess
	}
	c := s.candidates(id)
	switch len(c) {
	case 0:
		return nil, NoProcess
	case 1:
		return c[0], ""
	}
	return nil, AmbiguousProcess
}

// candidates are the processes of the span's pid that nothing the two resources say tells apart.
func (s *Store) candidates(id Identity) []*Process {
	if id.InstanceID != "" {
		if c := s.byInstance[id.InstanceID]; len(c) > 1 {
			return c
		}
	}
	return filter(s.byPID[id.PID], func(p *Process) bool {
		return !differ(id.HostName, p.id.HostName) && !differ(id.ContainerID, p.id.ContainerID) &&
			!differ(id.InstanceID, p.id.InstanceID) && !differ(id.ServiceName, p.id.ServiceName)
	})
}

// HoldsTrace says whether the process's windows hold samples of trace: evidence that a span of
// that trace is the process's.
func (p *Process) HoldsTrace(trace pcommon.TraceID) bool {
	for _, w := range p.windows {
		if _, ok := w.traces[trace]; ok {
			return true
		}
	}
	return false
}

// differ says two resources name different things: both say it, and not the same.
func differ(a, b string) bool { return a != "" && b != "" && a != b }

func filter(ps []*Process, keep func(*Process) bool) []*Process {
	var out []*Process
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

// Coverage says whether a process's windows cover [start, end].
type Coverage int

const (
	// Not yet: no window reaches the span's end.
	CoverNotYet Coverage = iota
	// Covered without a gap.
	CoverFull
	// The windows reach past both ends but leave a gap inside: a window that has not arrived
	// (out of order), or one the agent did not send (it sends none for a process that had no
	// samples in a window).
	CoverGap
	// The span begins before the earliest window held: the agent began tracking the process
	// later, that window expired, or it is still to come out of order.
	CoverBefore
)

// Covered is how much of [start, end] the process's windows cover (ns).
func (p *Process) Covered(start, end int64) int64 {
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

// Reach is the end of the latest window held.
func (p *Process) Reach() int64 {
	r := int64(0)
	for _, w := range p.windows {
		r = max(r, w.end)
	}
	return r
}

func (p *Process) Coverage(start, end int64) Coverage {
	if len(p.windows) == 0 {
		return CoverNotYet
	}
	// The gap allowance bridges windows only: a span that ends even 1 ms past the latest
	// window may have samples in the next one.
	if start < p.windows[0].start {
		return CoverBefore
	}
	if p.Reach() < end {
		return CoverNotYet
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
			return CoverGap
		}
		if runEnd >= end {
			return CoverFull
		}
	}
	return CoverGap
}

// Describe names a profiled process as its profiles' resource does.
func (p *Process) Describe() string {
	d := "host pid " + strconv.FormatInt(p.key.hostPID, 10)
	if p.id.PID != p.key.hostPID {
		d += ", pid " + strconv.FormatInt(p.id.PID, 10) + " in its PID namespace"
	}
	if p.id.ServiceName != "" {
		d += ", service.name " + p.id.ServiceName
	}
	if p.id.InstanceID != "" {
		d += ", service.instance.id " + p.id.InstanceID
	}
	if p.id.ContainerID != "" {
		d += ", container.id " + p.id.ContainerID
	}
	return d
}

// FirstReceived is when the earliest of the process's windows (by start) arrived; false when it
// holds none.
func (p *Process) FirstReceived() (time.Time, bool) {
	if len(p.windows) == 0 {
		return time.Time{}, false
	}
	return p.windows[0].received, true
}

// Held is how many samples the store holds.
func (s *Store) Held() int { return s.held }

// Processes is how many processes the store holds windows of.
func (s *Store) Processes() int { return len(s.procs) }

// HoldsProcess says whether the store holds windows of the host's process hostPID (no container).
func (s *Store) HoldsProcess(hostName string, hostPID int64) bool {
	_, ok := s.procs[processKey{hostName: hostName, hostPID: hostPID}]
	return ok
}

// PIDsIndexed is how many pids the lookup by pid holds (as many as the processes, once their
// dropped processes are unindexed).
func (s *Store) PIDsIndexed() int { return len(s.byPID) }
