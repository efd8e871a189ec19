// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/heldspans"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/heldspans/heldspanstest"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// fileStorageHost is a host with contrib's file_storage as `file_storage`.
func fileStorageHost(t testing.TB) (component.Host, component.ID) {
	t.Helper()
	return heldspanstest.FileStorageHost(t)
}

// run is one run of a Collector: the connector's state started on host, its spans to a sink.
type run struct {
	c    *spanProfiles
	sink *consumertest.TracesSink
}

var connectorID = component.MustNewID(typeStr)

func startRun(t *testing.T, host component.Host, storageID component.ID, clock time.Time) *run {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.Storage = &storageID
	require.NoError(t, cfg.Validate())
	c, err := newSpanProfiles(cfg, connectorID, componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	r := &run{c: c, sink: &consumertest.TracesSink{}}
	c.next = r.sink
	c.now = func() time.Time { return clock }
	require.NoError(t, c.Start(context.Background(), host))
	return r
}

// crash ends a run as kill -9 does: nothing is sent on, nothing but the storage remains (its
// client is closed only because bbolt locks its file against a second open in one process).
func (r *run) crash(t *testing.T) {
	close(r.c.stop)
	<-r.c.done
	require.NoError(t, r.c.held.Close(context.Background()))
}

// serverSpans is n server spans of process 1's thread 1, 5 ms each from `from` ms, ids from `first`.
func serverSpans(first, n int, from float64) ptrace.Traces {
	td := traces(service(1))
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for k := 0; k < n; k++ {
		s := spans.AppendEmpty()
		var id pcommon.SpanID
		binary.BigEndian.PutUint64(id[:], uint64(first+k))
		s.SetSpanID(id)
		s.SetTraceID(traceID(byte(first + k)))
		s.SetKind(ptrace.SpanKindServer)
		s.SetStartTimestamp(pcommon.Timestamp(ms(from + float64(k))))
		s.SetEndTimestamp(pcommon.Timestamp(ms(from + float64(k) + 5)))
		s.Attributes().PutInt("thread.id", 1)
	}
	return td
}

func coveringWindow() *request {
	r := newRequest()
	r.window(agentProcess(1), 0, 1000).cpuAt(on{tid: 1, stack: r.stack(native("a"))}, 2, 300, 700)
	return r
}

func enrichedCount(sink *consumertest.TracesSink) int {
	n := 0
	for _, td := range sink.AllTraces() {
		forEachSpan(td, func(s ptrace.Span) {
			if isEnriched(s) {
				n++
			}
		})
	}
	return n
}

// Spans the connector acknowledged and held for their window survive a crash: the next run
// replays them from storage, and the window that comes after the restart enriches them.
func TestHeldSpansSurviveACrash(t *testing.T) {
	host, id := fileStorageHost(t)
	clock := time.Unix(0, ms(0)).Add(time.Hour)
	first := startRun(t, host, id, clock)
	require.NoError(t, first.c.consumeTraces(context.Background(), serverSpans(1, 30, 10)))
	require.NoError(t, first.c.consumeTraces(context.Background(), serverSpans(31, 20, 400)))
	require.Zero(t, first.sink.SpanCount(), "held for their window")
	first.crash(t)

	second := startRun(t, host, id, clock.Add(5*time.Second))
	assert.Equal(t, 50, second.c.pending, "replayed from storage")
	require.NoError(t, second.c.consumeProfiles(context.Background(), coveringWindow().pd))
	assert.Equal(t, 50, second.sink.SpanCount())
	assert.Equal(t, 50, enrichedCount(second.sink))
	second.crash(t)

	// Sent on, they are gone from storage: a third run has nothing to replay.
	third := startRun(t, host, id, clock.Add(10*time.Second))
	assert.Zero(t, third.c.pending)
	third.crash(t)
}

// A span replayed after its max_wait was over leaves at the next check, unenriched when no
// window came: held, not lost, and not held forever.
func TestReplayedSpansLeaveWhenTheirWaitIsOver(t *testing.T) {
	host, id := fileStorageHost(t)
	clock := time.Unix(0, ms(0)).Add(time.Hour)
	first := startRun(t, host, id, clock)
	require.NoError(t, first.c.consumeTraces(context.Background(), serverSpans(1, 10, 10)))
	first.crash(t)
	second := startRun(t, host, id, clock.Add(time.Minute))
	second.c.expire()
	assert.Equal(t, 10, second.sink.SpanCount())
	assert.Zero(t, second.c.pending)
	second.crash(t)
}

func TestStorageThatIsNotThere(t *testing.T) {
	cfg := createDefaultConfig()
	missing := component.MustNewID("file_storage")
	cfg.Storage = &missing
	c, err := newSpanProfiles(cfg, connectorID, componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	err = c.Start(context.Background(), componenttest.NewNopHost())
	require.ErrorContains(t, err, `storage is "file_storage": no such extension in this Collector's service::extensions`)
}

// What keeping held spans in file_storage costs per span, beside the same work without it: one
// request of 512 server spans held, then the window that releases them (enriched, sent on, and
// with storage deleted).
//
//	go test -C collector/spanprofilesconnector -run '^$' -bench 'HeldSpans/(memory|file_storage)' -benchtime 200x -count 5
func BenchmarkHeldSpans(b *testing.B) {
	for _, withStorage := range []bool{false, true} {
		name := "memory"
		if withStorage {
			name = "file_storage"
		}
		b.Run(name, func(b *testing.B) {
			cfg := createDefaultConfig()
			host := component.Host(componenttest.NewNopHost())
			if withStorage {
				var id component.ID
				host, id = fileStorageHost(b)
				cfg.Storage = &id
			}
			c, err := newSpanProfiles(cfg, connectorID, componenttest.NewNopTelemetrySettings())
			require.NoError(b, err)
			c.next = consumertest.NewNop()
			clock := time.Unix(0, ms(0)).Add(time.Hour)
			c.now = func() time.Time { return clock }
			require.NoError(b, c.Start(context.Background(), host))
			defer func() {
				close(c.stop)
				<-c.done
				if c.held != nil {
					require.NoError(b, c.held.Close(context.Background()))
				}
			}()
			const spans = 512
			// CPU time of the process (every goroutine: bbolt's, the GC's), robust on a busy
			// machine where wall time is not.
			var cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				td := serverSpans(1, spans, 10)
				pd := coveringWindow().pd
				before := processCPU(b)
				b.StartTimer()
				require.NoError(b, c.consumeTraces(context.Background(), td))
				// A new window each time: the same one again would be a duplicate.
				clock = clock.Add(time.Millisecond)
				require.NoError(b, c.consumeProfiles(context.Background(), pd))
				b.StopTimer()
				cpu += processCPU(b) - before
				require.Zero(b, c.pending)
				c.store = profilestore.New(storeBounds(cfg), c.tel, c.logger)
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*spans), "cpu-ns/span")
		})
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// faultyStorage is a storage extension whose disk can fill up and whose deletes can fail; every
// run's client reads the same records, as file_storage's do across restarts.
type faultyStorage struct {
	*storagetest.TestStorage
	records                   storage.Client
	failSets, failDeletes     atomic.Bool
	failedSets, failedDeletes atomic.Int64
	// When set, a write waits until it is closed: a disk that stalls.
	stall atomic.Pointer[chan struct{}]
}

type faultyClient struct {
	storage.Client
	s *faultyStorage
}

func newFaultyStorage() (*faultyStorage, component.Host, component.ID) {
	s := &faultyStorage{TestStorage: storagetest.NewInMemoryStorageExtension("faulty")}
	s.records = storagetest.NewInMemoryClient(component.KindConnector, connectorID, "held_spans")
	return s, storagetest.NewStorageHost().WithExtension(s.ID, s), s.ID
}

func (s *faultyStorage) GetClient(context.Context, component.Kind, component.ID, string) (storage.Client, error) {
	return faultyClient{s.records, s}, nil
}

var errDiskFull = errors.New("write /var/lib/otelcol/file_storage: no space left on device")

func (f faultyClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if stall := f.s.stall.Load(); stall != nil {
		<-*stall
	}
	for _, op := range ops {
		if op.Type == storage.Set && f.s.failSets.Load() && op.Key != heldspans.IndexKey {
			f.s.failedSets.Add(1)
			return errDiskFull
		}
		if op.Type == storage.Delete && f.s.failDeletes.Load() {
			f.s.failedDeletes.Add(1)
			return errDiskFull
		}
	}
	return f.Client.Batch(ctx, ops...)
}

// The records outlive a run's client, as a file does.
func (faultyClient) Close(context.Context) error { return nil }

// A save that fails (the disk is full) refuses the request with a retryable error, holds none
// of its spans and sends none on; the sender's retry, once the disk has room, is kept and
// survives a crash: no acknowledged span is lost, none is held twice.
func TestAFailedSaveRefusesTheRequest(t *testing.T) {
	s, host, id := newFaultyStorage()
	clock := time.Unix(0, ms(0)).Add(time.Hour)
	first := startRun(t, host, id, clock)
	s.failSets.Store(true)
	td := serverSpans(1, 30, 10)
	err := first.c.consumeTraces(context.Background(), td)
	require.ErrorIs(t, err, errDiskFull)
	// Not marked permanent (consumererror.NewPermanent): OTLP receivers answer Unavailable,
	// which SDKs and exporters retry.
	assert.Contains(t, err.Error(), "retry later")
	assert.Positive(t, s.failedSets.Load())
	assert.Zero(t, first.c.pending, "nothing held")
	assert.Zero(t, first.sink.SpanCount(), "nothing sent on")
	assert.Equal(t, 30, td.SpanCount(), "the refused batch is the sender's as it was, for its retry")

	s.failSets.Store(false)
	require.NoError(t, first.c.consumeTraces(context.Background(), td))
	assert.Equal(t, 30, first.c.pending)
	first.crash(t)

	restartEnriches(t, host, id, clock.Add(5*time.Second), 30)
}

// A delete that fails leaves no record behind for good: it is retried at the next check, and a
// restart after that replays nothing (the spans were sent on once).
func TestAFailedDeleteIsRetried(t *testing.T) {
	s, host, id := newFaultyStorage()
	clock := time.Unix(0, ms(0)).Add(time.Hour)
	first := startRun(t, host, id, clock)
	require.NoError(t, first.c.consumeTraces(context.Background(), serverSpans(1, 30, 10)))
	s.failDeletes.Store(true)
	require.NoError(t, first.c.consumeProfiles(context.Background(), coveringWindow().pd))
	assert.Equal(t, 30, first.sink.SpanCount(), "sent on whatever the storage says")
	assert.Positive(t, s.failedDeletes.Load())
	assert.Equal(t, 1, first.c.held.Undeleted(), "waits for its retry")

	first.c.expire()
	assert.Equal(t, 1, first.c.held.Undeleted(), "the disk still fails: still waiting")
	s.failDeletes.Store(false)
	first.c.expire()
	assert.Zero(t, first.c.held.Undeleted(), "retried at the next check")
	first.crash(t)

	second := startRun(t, host, id, clock.Add(5*time.Second))
	assert.Zero(t, second.c.pending, "nothing replayed: the spans were sent on")
	second.crash(t)
}

// A graceful shutdown with storage keeps the spans still waiting for their windows for the
// next start, rather than sending them on unenriched; the window that comes after the restart
// enriches them. Spans whose windows are in are sent on, enriched, at the shutdown.
func TestAGracefulRestartKeepsHeldSpans(t *testing.T) {
	host, id := fileStorageHost(t)
	clock := time.Unix(0, ms(0)).Add(time.Hour)
	first := startRun(t, host, id, clock)
	require.NoError(t, first.c.consumeTraces(context.Background(), serverSpans(1, 30, 10)))
	// Past the window the restart's agent sends: the first run enriches them before it stops.
	require.NoError(t, first.c.consumeTraces(context.Background(), serverSpans(31, 10, 2000)))
	w := newRequest()
	w.window(agentProcess(1), 1500, 2500).cpuAt(on{tid: 1, stack: w.stack(native("a"))}, 2, 1900, 2200)
	require.NoError(t, first.c.consumeProfiles(context.Background(), w.pd))
	require.Equal(t, 10, enrichedCount(first.sink))
	require.NoError(t, first.c.Shutdown(context.Background()))
	assert.Equal(t, 10, first.sink.SpanCount(), "the 30 waiting were kept, not sent on unenriched")

	restartEnriches(t, host, id, clock.Add(5*time.Second), 30)
}

// restartEnriches starts a run that replays n spans from storage, once each, and enriches them
// all with the window that comes after the restart.
func restartEnriches(t *testing.T, host component.Host, id component.ID, clock time.Time, n int) {
	t.Helper()
	r := startRun(t, host, id, clock)
	assert.Equal(t, n, r.c.pending, "the acknowledged spans, back from storage once")
	require.NoError(t, r.c.consumeProfiles(context.Background(), coveringWindow().pd))
	assert.Equal(t, n, enrichedCount(r.sink))
	r.crash(t)
}

// A disk that stalls delays only the requests being written: the connector's lock is not held
// while it writes, so profiles are taken and the spans they release are sent on meanwhile, and
// the request whose spans wait for the disk is not acknowledged before they are kept.
func TestAStalledDiskDoesNotStallIngest(t *testing.T) {
	s, host, id := newFaultyStorage()
	clock := time.Unix(0, ms(0)).Add(time.Hour)
	r := startRun(t, host, id, clock)
	require.NoError(t, r.c.consumeTraces(context.Background(), serverSpans(1, 30, 10)))
	stall := make(chan struct{})
	s.stall.Store(&stall)
	written := make(chan error, 1)
	go func() { written <- r.c.consumeTraces(context.Background(), serverSpans(31, 10, 400)) }()
	released := make(chan error, 1)
	go func() { released <- r.c.consumeProfiles(context.Background(), coveringWindow().pd) }()
	deadline := time.Now().Add(10 * time.Second)
	for enrichedCount(r.sink) < 30 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, 30, enrichedCount(r.sink), "profiles waited for the stalled disk: the write holds the connector's lock")
	select {
	case <-written:
		t.Fatal("the request whose spans are being written was acknowledged before they were kept")
	default:
	}
	close(stall)
	require.NoError(t, <-written)
	require.NoError(t, <-released)
	// The 10 written meanwhile met the window at once, and every record was deleted once the
	// disk came back: nothing to replay.
	assert.Equal(t, 40, enrichedCount(r.sink))
	r.crash(t)
	again := startRun(t, host, id, clock.Add(5*time.Second))
	assert.Zero(t, again.c.pending)
	again.crash(t)
}
