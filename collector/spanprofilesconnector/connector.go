// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/heldspans"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// spanProfiles is the state one `span_profiles` component id shares between its two halves:
// the traces it holds and the profile windows it joins them with.
type spanProfiles struct {
	cfg    *Config
	bounds batchBounds
	logger *zap.Logger
	tel    *telemetry
	now    func() time.Time

	mu sync.Mutex
	// Where spans go: the traces->traces half's next consumer (the profiles->traces half's
	// until that one is created).
	next  consumer.Traces
	store *profilestore.Store
	names *traceNames
	// Batches of spans of one resource that wait, oldest first.
	queue []*unit
	// Spans held in queue.
	pending int
	// Resources whose spans waited max_wait for profiles that never came (a service the
	// agent does not profile): their next spans pass at once, until profiles of theirs arrive.
	unprofiled map[profilestore.Identity]time.Time
	// Which process each span resource matched, and what could not be told apart.
	identities *identities
	// The routes of requests without http.route.
	routes *routeBook

	// Which halves were created: a metrics half takes an input only where no traces half of
	// that input exists (metrics_halves.go).
	tracesToTraces, profilesToTraces bool
	// Where the metrics go (nil: no metrics pipeline takes them), what they hold, and when
	// they were last sent.
	metricsNext consumer.Metrics
	metrics     *waitMetrics
	mtel        *metricsTelemetry
	lastFlush   time.Time

	// With `storage`: where held spans are kept across a crash (internal/heldspans), and the records of
	// the units finished since the lock was taken, forgotten once their spans are sent on.
	held       *heldspans.Spans
	heldToDrop []uint64

	// Lifecycle: the halves start and shut down the one state through sharedcomponent (the
	// first Start, the last Shutdown); id is the component's, which names its storage records.
	id     component.ID
	closed bool
	stop   chan struct{}
	done   chan struct{}
}

// unprofiledBound bounds the resources remembered as unprofiled (a node runs far fewer
// services); past it they are all forgotten and each waits max_wait once more.
const unprofiledBound = 4_096

func newSpanProfiles(cfg *Config, id component.ID, set component.TelemetrySettings) (*spanProfiles, error) {
	tel, err := newTelemetry(set)
	if err != nil {
		return nil, err
	}
	mtel, err := newMetricsTelemetry(tel.builder)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	metrics := newWaitMetrics(cfg.Metrics, pcommon.NewTimestampFromTime(now), mtel.fold)
	metrics.SetInstance(collectorInstance(set.Resource))
	return &spanProfiles{
		id:         id,
		cfg:        cfg,
		bounds:     batchBounds{spans: cfg.MaxBatchSpans, bytes: cfg.MaxBatchBytes},
		logger:     set.Logger,
		tel:        tel,
		now:        time.Now,
		store:      profilestore.New(storeBounds(cfg), tel, set.Logger),
		names:      newTraceNames(tracesNamed),
		unprofiled: map[profilestore.Identity]time.Time{},
		identities: newIdentities(set.Logger),
		routes:     newRouteBook(),
		metrics:    metrics,
		mtel:       mtel,
	}, nil
}

// storeBounds are the limits of the store of profile windows.
func storeBounds(cfg *Config) profilestore.Bounds {
	return profilestore.Bounds{MaxSamples: cfg.MaxSamples, MaxProcesses: cfg.MaxProcesses, Retention: cfg.Retention}
}

// unit is the spans of one resource that arrived together: they leave together, once every
// one of them is enriched or passed.
type unit struct {
	td        ptrace.Traces
	id        profilestore.Identity
	service   string
	spans     []ptrace.Span
	settled   []bool
	unsettled int
	arrived   time.Time
	queued    bool
	done      bool
	// Its record in storage (0: none).
	stored uint64
	// Its process as names.go interns it: a trace has one name per process (names.go).
	proc procRef
}

// Start opens the storage, replays what it held and starts the expiry loop (once: the first
// half's Start, through sharedcomponent).
func (c *spanProfiles) Start(ctx context.Context, host component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.Storage != nil {
		held, units, err := heldspans.Open(ctx, host, *c.cfg.Storage, c.id)
		if err != nil {
			return err
		}
		c.held = held
		c.replay(units)
	}
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go c.expireLoop(c.stop, c.done)
	return nil
}

// replay queues the spans a crashed run held, as they arrived then: each waits out what is left
// of its max_wait for the windows that cover it.
func (c *spanProfiles) replay(units []heldspans.Unit) {
	spans := 0
	for _, stored := range units {
		rss := stored.Traces.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			c.names.note(rss.At(i))
			u := newUnit(rss.At(i), stored.Arrived)
			u.proc = c.names.ref(u.id)
			u.stored = stored.Seq
			c.settleOnArrival(u)
			c.queue = append(c.queue, u)
			u.queued = true
			c.pending += len(u.spans)
			spans += len(u.spans)
		}
	}
	c.publish()
	if spans > 0 {
		c.logger.Info("spans held when the Collector last stopped are back from storage, waiting for their windows", zap.Int("spans", spans), zap.Int("batches", len(units)))
	}
}

// takeHeldToDrop returns the records of the units finished since the lock was taken (called
// with it held): their spans are in the batch about to be sent.
func (c *spanProfiles) takeHeldToDrop() []uint64 {
	seqs := c.heldToDrop
	c.heldToDrop = nil
	return seqs
}

// dropHeld deletes the records of spans sent on (whether the next consumer took or refused
// them: a refusal is counted, and replaying them later would not undo it), and retries the
// deletes that failed before (with seqs empty, the expiry check's retry).
func (c *spanProfiles) dropHeld(ctx context.Context, seqs []uint64) {
	if c.held == nil {
		return
	}
	if left, err := c.held.Forget(ctx, seqs); err != nil {
		c.logger.Warn("could not delete spans sent on from storage: retried at the next check; a restart before then would send them again", zap.Int("batches", left), zap.Error(err))
	}
}

// Shutdown ends the state (once: the last half's Shutdown, through sharedcomponent): spans
// still waiting are enriched if they can be, else sent on as they came. A state whose halves
// never started (the Collector failed to start another component) shuts down all the same.
func (c *spanProfiles) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	stop, done := c.stop, c.done
	c.stop, c.closed = nil, true
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	c.mu.Lock()
	out := ptrace.NewTraces()
	now := c.now()
	kept := 0
	for _, u := range c.queue {
		if u.done {
			continue
		}
		// With storage, a held span is kept for the next start (its record is on disk, and the
		// agent sends the windows it has not yet sent then) rather than sent on unenriched;
		// what the windows here already cover is sent on enriched.
		c.settle(u, now, c.held == nil)
		if c.held != nil && u.unsettled > 0 && u.stored != 0 {
			kept += len(u.spans)
			continue
		}
		for i := range u.spans {
			if !u.settled[i] {
				c.tel.span(spanAtShutdown, 1)
			}
		}
		c.finish(u, out)
	}
	if kept > 0 {
		c.logger.Info("spans still waiting for their windows are kept in storage for the next start", zap.Int("spans", kept))
	}
	c.queue = nil
	c.publish()
	md, mnext := c.metricsDue(now, true)
	dropped := c.takeHeldToDrop()
	c.mu.Unlock()
	c.emit(ctx, out)
	c.dropHeld(ctx, dropped)
	c.emitMetrics(ctx, md, mnext)
	var errs []error
	if c.held != nil {
		errs = append(errs, c.held.Close(ctx))
	}
	return errors.Join(append(errs, c.tel.shutdown())...)
}

// checkEvery is how often spans past their wait and windows past retention are looked for:
// a tenth of max_wait, between 100 ms and 1 s.
func (c *spanProfiles) checkEvery() time.Duration {
	return min(max(c.cfg.MaxWait/10, 100*time.Millisecond), time.Second)
}

func (c *spanProfiles) expireLoop(stop, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(c.checkEvery())
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			c.expire()
		}
	}
}

// expire sends on the spans that waited max_wait (enriched if their windows allow) and drops
// the windows past retention.
func (c *spanProfiles) expire() {
	c.mu.Lock()
	now := c.now()
	c.store.Expire(now)
	out := ptrace.NewTraces()
	for _, u := range c.queue {
		if now.Sub(u.arrived) < c.cfg.MaxWait {
			break
		}
		if !u.done {
			c.settle(u, now, true)
			c.finish(u, out)
		}
	}
	c.compact()
	md, mnext := c.metricsDue(now, false)
	dropped := c.takeHeldToDrop()
	c.mu.Unlock()
	c.emit(context.Background(), out)
	// Also the retry of deletes that failed.
	c.dropHeld(context.Background(), dropped)
	c.emitMetrics(context.Background(), md, mnext)
}

func (c *spanProfiles) consumeTraces(ctx context.Context, td ptrace.Traces) error {
	stored, err := c.keep(ctx, td)
	if err != nil {
		return err
	}
	out := ptrace.NewTraces()
	c.mu.Lock()
	now := c.now()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		c.names.note(rss.At(i))
	}
	for i := 0; i < rss.Len(); i++ {
		u := newUnit(rss.At(i), now)
		if stored != nil {
			// Finished at once (below), its record is deleted with the others sent on.
			u.stored = stored[i]
		}
		u.proc = c.names.ref(u.id)
		c.settleOnArrival(u)
		c.settle(u, now, false)
		switch {
		case u.unsettled == 0:
			c.finish(u, out)
		case c.pending+len(u.spans) > c.cfg.MaxPendingSpans:
			c.tel.span(spanOverPendingBound, u.unsettled)
			c.finish(u, out)
		default:
			c.queue = append(c.queue, u)
			u.queued = true
			c.pending += len(u.spans)
		}
	}
	c.publish()
	dropped := c.takeHeldToDrop()
	c.mu.Unlock()
	err = c.send(ctx, out)
	c.dropHeld(ctx, dropped)
	return err
}

// keep writes each resource's spans of td to storage (when configured) before any is held or
// acknowledged, and returns their records' numbers, one per resource in order. A failed write
// refuses the whole request with a retryable error (the sender, an SDK or a Collector, sends it
// again): acknowledging spans a crash would lose is what storage is configured to prevent.
func (c *spanProfiles) keep(ctx context.Context, td ptrace.Traces) ([]uint64, error) {
	if c.held == nil || td.ResourceSpans().Len() == 0 {
		return nil, nil
	}
	// One ptrace.Traces per resource (moved, not copied), each marshaled as one record, then
	// moved back in order, also on a refusal: a sender's retry queue may hold this very batch.
	rss := td.ResourceSpans()
	own := make([]ptrace.Traces, rss.Len())
	for i := range own {
		own[i] = ptrace.NewTraces()
		rss.At(i).MoveTo(own[i].ResourceSpans().AppendEmpty())
	}
	stored, err := c.held.Save(ctx, c.now(), own)
	for i := range own {
		own[i].ResourceSpans().At(0).MoveTo(rss.At(i))
	}
	if err != nil {
		c.logger.Warn("could not keep spans in storage: the request is refused, its sender retries it", zap.Int("spans", td.SpanCount()), zap.Error(err))
		return nil, fmt.Errorf("span_profiles: keeping the spans in storage failed (retry later): %w", err)
	}
	return stored, nil
}

func (c *spanProfiles) consumeProfiles(_ context.Context, pd pprofile.Profiles) error {
	out := ptrace.NewTraces()
	c.mu.Lock()
	now := c.now()
	if got := c.store.Ingest(pd, now); len(got) > 0 {
		// Twice: a trace's first request waits for the requests it called in other services
		// (path.go), which may be queued after it.
		for range 2 {
			for _, u := range c.queue {
				if u.done {
					continue
				}
				c.settle(u, now, false)
				if u.unsettled == 0 {
					c.finish(u, out)
				}
			}
		}
		c.compact()
	}
	dropped := c.takeHeldToDrop()
	c.mu.Unlock()
	// Spans released by these profiles belong to the traces pipeline, not to the agent's
	// request: its context and its error are not theirs.
	c.emit(context.Background(), out)
	c.dropHeld(context.Background(), dropped)
	return nil
}

// newUnit moves rs out of the incoming batch into a unit of its own.
func newUnit(rs ptrace.ResourceSpans, now time.Time) *unit {
	u := &unit{td: ptrace.NewTraces(), arrived: now}
	held := u.td.ResourceSpans().AppendEmpty()
	rs.MoveTo(held)
	u.id = profilestore.IdentityOf(held.Resource().Attributes())
	u.service = profilestore.StrAttr(held.Resource().Attributes(), MetricAttrService)
	sss := held.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		spans := sss.At(i).Spans()
		for k := 0; k < spans.Len(); k++ {
			u.spans = append(u.spans, spans.At(k))
		}
	}
	u.settled = make([]bool, len(u.spans))
	u.unsettled = len(u.spans)
	return u
}

// settleOnArrival passes the spans no profile can enrich: times that make no sense, and spans
// a Collector before this one enriched already.
func (c *spanProfiles) settleOnArrival(u *unit) {
	for i, s := range u.spans {
		start, end := int64(s.StartTimestamp()), int64(s.EndTimestamp())
		why := ""
		switch {
		case start <= 0 || end < start || end-start > int64(maxDuration):
			why = spanInvalidTimes
		case isEnriched(s):
			why = spanAlreadyEnriched
		default:
			continue
		}
		c.tel.span(why, 1)
		u.settled[i] = true
		u.unsettled--
	}
}

// settle enriches the unit's spans whose windows are in, and when final (their wait is over)
// passes the others on as they came.
func (c *spanProfiles) settle(u *unit, now time.Time, final bool) {
	if u.unsettled == 0 {
		return
	}
	p, why, cands := c.store.Match(u.id)
	if why == spanAmbiguousProcess {
		p = c.identities.resolve(u, cands)
		if owner := c.store.InstanceElsewhere(u.id); owner != nil && final {
			c.identities.logForged(u.id, owner)
		} else if p == nil && final {
			c.identities.logAmbiguous(u.id, cands)
		}
	}
	if p != nil {
		delete(c.unprofiled, u.id)
		c.identities.bind(u.id, p)
	} else if why == spanNoProcess {
		if seen, ok := c.unprofiled[u.id]; ok && now.Sub(seen) < c.cfg.Retention {
			final = true
		}
		if final {
			if len(c.unprofiled) >= unprofiledBound {
				clear(c.unprofiled)
			}
			c.unprofiled[u.id] = now
		}
	} else if why == spanNoProcessIdentity {
		// No identity: no window will change that.
		final = true
	}
	// The earliest window began after the span and has been held for max_wait: no window of
	// that time is still on its way.
	settledBefore := false
	if p != nil {
		if first, ok := p.FirstReceived(); ok {
			settledBefore = now.Sub(first) >= c.cfg.MaxWait
		}
	}
	reach := int64(0)
	if p != nil {
		reach = p.Reach()
	}
	for i, s := range u.spans {
		if u.settled[i] {
			continue
		}
		// Most waiting spans wait for a window that has not come: one comparison tells.
		if !final && !settledBefore && profilestore.SpanTimesOf(s).End > reach {
			continue
		}
		if c.settleSpan(s, u, p, why, final, settledBefore) {
			u.settled[i] = true
			u.unsettled--
		}
	}
}

// settleSpan enriches one span or, when nothing more can come for it, counts why not.
// Returns whether the span is settled.
func (c *spanProfiles) settleSpan(s ptrace.Span, u *unit, p *profilestore.Process, why string, final, settledBefore bool) bool {
	if p == nil {
		if final {
			c.tel.span(why, 1)
		}
		return final
	}
	st := profilestore.SpanTimesOf(s)
	st.OwnPID = u.id.PID
	switch p.Coverage(st.Start, st.End) {
	case profilestore.CoverFull:
	case profilestore.CoverGap:
		if !final {
			return false
		}
		// A gap over most of the span is the agent not sending (stopped, restarted), not a
		// thread without samples: zeros would mislead.
		if 2*p.Covered(st.Start, st.End) < st.End-st.Start {
			c.tel.span(spanNotCovered, 1)
			return true
		}
		c.tel.gaps.Add(context.Background(), 1)
	case profilestore.CoverBefore:
		if final || settledBefore {
			c.tel.span(spanNotCovered, 1)
			return true
		}
		return false
	default:
		if final {
			c.tel.span(spanNotCovered, 1)
		}
		return final
	}
	if !final && c.names.waitsForDownstream(s, u.proc) {
		// Its path carries the called requests' causes: they are enriched first.
		return false
	}
	j := p.Join(st)
	c.routes.name(s, c.names.operation(s.TraceID(), u.proc), bestRoute(j.Routes))
	switch {
	case j.RefusedAny():
		// Enriched with the figures the refused samples do not touch (if any).
		c.tel.span(spanSamplesRefused, 1)
	case !j.Seen:
		// The sampler never saw the thread on or off CPU around the span (its main thread
		// guessed, idle or not profiled): no CPU figure, and zeros would be an answer.
		c.tel.span(spanNoThreadSamples, 1)
		if !j.AllocKnown() {
			return true
		}
	default:
		c.tel.span(spanEnriched, 1)
	}
	// Holders are named as the process that held the thread calls them.
	nameOf := c.names.in(u.proc)
	enrich(s, j, c.cfg.TopFrames, nameOf)
	if s.Kind() == ptrace.SpanKindServer {
		c.names.settled(s, causeOf(j, nameOf))
		putPath(s, c.names.pathOf(s, u.proc), c.cfg.TopFrames)
	}
	if c.metricsNext != nil {
		c.metrics.observe(u.service, s, j, nameOf)
	}
	if j.OwnOutside > 0 {
		c.tel.ownOutside.Add(context.Background(), int64(j.OwnOutside))
	}
	return true
}

// finish moves a unit's spans to out and forgets the unit. A request without a route, whose
// samples named none, is named by its method and templated path on its way out.
func (c *spanProfiles) finish(u *unit, out ptrace.Traces) {
	for _, s := range u.spans {
		c.routes.name(s, c.names.operation(s.TraceID(), u.proc), "")
		c.names.settled(s, "")
	}
	u.td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	if !u.done && u.queued {
		c.pending -= len(u.spans)
	}
	if !u.done && u.stored != 0 {
		c.heldToDrop = append(c.heldToDrop, u.stored)
	}
	u.done = true
	u.spans, u.settled = nil, nil
	c.publish()
}

// compact drops the finished units from the queue.
func (c *spanProfiles) compact() {
	c.queue = slices.DeleteFunc(c.queue, func(u *unit) bool { return u.done })
	c.publish()
}

func (c *spanProfiles) publish() {
	c.tel.pendingSpans.Store(int64(c.pending))
}

func (c *spanProfiles) nextConsumer() consumer.Traces {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next
}

// emit sends spans released outside a traces request on; a refusal is logged and counted
// (send), there is no caller to hand it to.
func (c *spanProfiles) emit(ctx context.Context, out ptrace.Traces) {
	_ = c.send(ctx, out)
}

// send passes spans to the next consumer in batches within max_batch_spans and max_batch_bytes.
// Each refused batch is counted and logged; the refusals are returned together.
func (c *spanProfiles) send(ctx context.Context, out ptrace.Traces) error {
	if out.ResourceSpans().Len() == 0 {
		return nil
	}
	next := c.nextConsumer()
	if next == nil {
		return nil
	}
	var errs []error
	for _, batch := range c.bounds.split(out) {
		n := batch.SpanCount()
		if err := next.ConsumeTraces(ctx, batch); err != nil {
			c.tel.errors.Add(context.Background(), 1)
			c.logger.Warn("the next consumer refused a batch of spans", zap.Int("spans", n), zap.Error(err))
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// metricsDue returns the metrics to send when their flush interval has passed (or now, when
// last), and where they go; nothing when no metrics pipeline takes them.
func (c *spanProfiles) metricsDue(now time.Time, last bool) (pmetric.Metrics, consumer.Metrics) {
	if c.metricsNext == nil {
		return pmetric.Metrics{}, nil
	}
	if c.lastFlush.IsZero() {
		// The first look: the interval starts now, on the connector's clock.
		c.lastFlush = now
	}
	if !last && now.Sub(c.lastFlush) < c.cfg.Metrics.FlushInterval {
		return pmetric.Metrics{}, nil
	}
	c.lastFlush = now
	md := c.metrics.Emit(pcommon.NewTimestampFromTime(now))
	// After the flush's election: the series sent.
	c.mtel.series.Store(int64(c.metrics.Series()))
	return md, c.metricsNext
}

// emitMetrics sends a batch of metrics on; a refusal is logged and counted.
func (c *spanProfiles) emitMetrics(ctx context.Context, md pmetric.Metrics, next consumer.Metrics) {
	if next == nil || md.ResourceMetrics().Len() == 0 {
		return
	}
	if err := next.ConsumeMetrics(ctx, md); err != nil {
		c.mtel.exportErrors.Add(context.Background(), 1)
		c.logger.Warn("the next consumer refused the connector's metrics", zap.Int("points", md.DataPointCount()), zap.Error(err))
	}
}
