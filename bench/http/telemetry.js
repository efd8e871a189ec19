'use strict';
// OpenTelemetry setup of the benchmark service for one mode: a NodeTracerProvider with a
// BatchSpanProcessor feeding an exporter that drops spans (so exporting costs the same in every
// mode), the http instrumentation, and the mode's context manager. Must run before node:http
// is required, so the instrumentation can patch it.

const path = require('node:path');

const PACKAGE_ROOT = path.join(__dirname, '..', '..');

// Counts and drops: the batching, span conversion and queueing cost is paid, the network is not.
class DroppingExporter {
  constructor() {
    this.spans = 0;
  }

  export(spans, resultCallback) {
    this.spans += spans.length;
    resultCallback({ code: 0 });
  }

  shutdown() {
    return Promise.resolve();
  }

  forceFlush() {
    return Promise.resolve();
  }
}

function noop() {}

// The stock manager with the ThreadContextManager's own hook mechanism installed beside it,
// doing nothing (floor) or only the context lookup: splits (b)'s cost into its parts.
function withDiagnosticHooks(manager, lookup) {
  const { trackAsyncCallbacks, detectMechanism } = require(path.join(PACKAGE_ROOT, 'js', 'hooks'));
  const active = lookup ? () => manager.active() : noop;
  const enable = manager.enable.bind(manager);
  manager.enable = () => {
    enable();
    trackAsyncCallbacks(active, noop, noop);
    return manager;
  };
  manager.mechanism = detectMechanism().name;
  return manager;
}

function createContextManager(modeName) {
  if (modeName === 'als' || modeName === 'als+hooks' || modeName === 'als+hooks+lookup') {
    const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
    const manager = new AsyncLocalStorageContextManager();
    return modeName === 'als' ? manager : withDiagnosticHooks(manager, modeName === 'als+hooks+lookup');
  }
  const { ThreadContextManager } = require(PACKAGE_ROOT);
  if (modeName === 'tcm') return new ThreadContextManager();
  if (modeName === 'tcm-cheap') return new ThreadContextManager({ asyncTracking: false });
  throw new TypeError(`modeName: expected als, als+hooks, als+hooks+lookup, tcm or tcm-cheap, got ${JSON.stringify(modeName)}`);
}

// Returns { inChildSpan, exporter, provider, contextManager } for an OpenTelemetry mode.
function setupTelemetry(modeName) {
  const { trace, SpanStatusCode } = require('@opentelemetry/api');
  const { NodeTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-node');
  const { registerInstrumentations } = require('@opentelemetry/instrumentation');
  const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');

  const exporter = new DroppingExporter();
  // A queue deep enough that no span is dropped between two batches at full load.
  const processor = new BatchSpanProcessor(exporter, { maxQueueSize: 16384, maxExportBatchSize: 512 });
  const provider = new NodeTracerProvider({ spanProcessors: [processor] });
  const contextManager = createContextManager(modeName);
  provider.register({ contextManager });
  registerInstrumentations({ tracerProvider: provider, instrumentations: [new HttpInstrumentation()] });

  const tracer = trace.getTracer('bench-http');
  function inChildSpan(name, fn) {
    return tracer.startActiveSpan(name, async (span) => {
      try {
        return await fn();
      } catch (err) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: String(err) });
        throw err;
      } finally {
        span.end();
      }
    });
  }
  return { inChildSpan, exporter, provider, contextManager };
}

module.exports = { setupTelemetry, DroppingExporter };
