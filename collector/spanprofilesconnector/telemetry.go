package spanprofilesconnector

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// What happened to a span (the `outcome` attribute of otelcol_connector_spanprofiles_spans).
const (
	spanEnriched          = "enriched"
	spanNoProcess         = "no_process"          // no profiles of its process arrived within max_wait
	spanAmbiguousProcess  = "ambiguous_process"   // several processes fit its resource
	spanNoProcessIdentity = "no_process_identity" // its resource has neither service.instance.id nor process.pid
	spanNotCovered        = "not_covered"         // its process's windows do not cover it
	spanNoThreadSamples   = "no_thread_samples"   // its thread had no sample in the windows around it: nothing to say
	spanSamplesRefused    = "samples_refused"     // samples of its thread there were refused: the figures they touch are left out
	spanInvalidTimes      = "invalid_times"       // it ends before it starts, or lasts longer than a day
	spanAlreadyEnriched   = "already_enriched"    // it carries thread_ctx.samples already
	spanOverPendingBound  = "over_pending_bound"  // max_pending_spans were waiting
	spanAtShutdown        = "shutdown"            // still waiting when the Collector stopped
)

// What happened to a profile sample (otelcol_connector_spanprofiles_samples).
const (
	sampleKept          = "kept"
	sampleInvalid       = "invalid"           // an index out of its table, a value or time out of range
	sampleUntimed       = "untimed"           // no timestamp per value (the agent's window kept no times)
	sampleNoThread      = "no_thread"         // no thread.id
	sampleOverBound     = "over_sample_bound" // max_samples were held
	sampleUnsupported   = "unsupported"       // a profile the join cannot read (off-CPU of another profiler, an unknown unit)
	sampleEvictedOnDrop = "evicted"           // held, then dropped with its window to make room
)

// What happened to a profile window (otelcol_connector_spanprofiles_windows).
const (
	windowKept             = "kept"
	windowDuplicate        = "duplicate"          // the same process and time range arrived before
	windowInvalid          = "invalid"            // no time, or a duration of more than a day
	windowExpired          = "expired"            // kept for `retention`, then dropped
	windowEvicted          = "evicted"            // dropped early to stay within max_samples
	windowOverProcessBound = "over_process_bound" // max_processes were held, none could be forgotten
)

// telemetry is the connector's own metrics, through the Collector's telemetry settings.
type telemetry struct {
	spans, samples, windows  metric.Int64Counter
	gaps, ownOutside, errors metric.Int64Counter
	// Gauges, read by the meter's callback without taking the connector's lock.
	pendingSpans, heldSamples, processes atomic.Int64
	registration                         metric.Registration
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	m := set.MeterProvider.Meter("otel-thread-ctx/collector/spanprofilesconnector")
	t := &telemetry{}
	var errs []error
	counter := func(name, desc, unit string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	t.spans = counter("otelcol_connector_spanprofiles_spans", "Spans that left the connector, by outcome (enriched, or why not).", "{spans}")
	t.samples = counter("otelcol_connector_spanprofiles_samples", "Profile samples received, by outcome (kept, or why not).", "{samples}")
	t.windows = counter("otelcol_connector_spanprofiles_windows", "Profile windows (one process's profiles of one agent window), by outcome.", "{windows}")
	t.gaps = counter("otelcol_connector_spanprofiles_spans_with_gaps", "Enriched spans whose time had a gap between its process's windows (counted as no samples).", "{spans}")
	t.ownOutside = counter("otelcol_connector_spanprofiles_own_samples_outside_span", "Samples linked to a span but timed outside it: clock skew between the SDK and the agent.", "{samples}")
	t.errors = counter("otelcol_connector_spanprofiles_export_errors", "Batches of spans the next consumer refused (a full sending queue, a backend down).", "{batches}")
	gauge := func(name, desc, unit string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return g
	}
	pending := gauge("otelcol_connector_spanprofiles_pending_spans", "Spans held, waiting for the windows that cover them.", "{spans}")
	held := gauge("otelcol_connector_spanprofiles_held_samples", "Profile samples held for spans to come.", "{samples}")
	procs := gauge("otelcol_connector_spanprofiles_processes", "Processes whose profile windows are held.", "{processes}")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(pending, t.pendingSpans.Load())
		o.ObserveInt64(held, t.heldSamples.Load())
		o.ObserveInt64(procs, t.processes.Load())
		return nil
	}, pending, held, procs)
	if err != nil {
		return nil, err
	}
	t.registration = reg
	return t, nil
}

// The attribute sets of every outcome, built once: a span's count costs no allocation.
var outcomes = func() map[string]metric.AddOption {
	m := map[string]metric.AddOption{}
	for _, o := range []string{
		spanEnriched, spanNoProcess, spanAmbiguousProcess, spanNoProcessIdentity, spanNotCovered, spanNoThreadSamples, spanSamplesRefused,
		spanInvalidTimes, spanAlreadyEnriched, spanOverPendingBound, spanAtShutdown,
		sampleKept, sampleInvalid, sampleUntimed, sampleNoThread, sampleOverBound, sampleUnsupported, sampleEvictedOnDrop,
		windowKept, windowDuplicate, windowInvalid, windowExpired, windowEvicted, windowOverProcessBound,
	} {
		m[o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))
	}
	return m
}()

func outcome(o string) metric.AddOption {
	return outcomes[o]
}

func (t *telemetry) span(o string, n int) {
	if n > 0 {
		t.spans.Add(context.Background(), int64(n), outcome(o))
	}
}

func (t *telemetry) sample(o string, n int) {
	if n > 0 {
		t.samples.Add(context.Background(), int64(n), outcome(o))
	}
}

func (t *telemetry) window(o string) {
	t.windows.Add(context.Background(), 1, outcome(o))
}

func (t *telemetry) shutdown() error {
	return t.registration.Unregister()
}
