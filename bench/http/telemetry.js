'use strict';
// OpenTelemetry setup of the benchmark service for one mode: a NodeTracerProvider with a
// BatchSpanProcessor feeding an exporter that drops spans (so exporting costs the same in every
// mode), the http instrumentation, and the mode's context manager. Must run before node:http
// is required, so the instrumentation can patch it.

const path = require('node:path');

const { DroppingExporter } = require('../lib/dropping-exporter');
const { installHooks } = require('../lib/hook-modes');

const PACKAGE_ROOT = path.join(__dirname, '..', '..');

// The stock manager with the ThreadContextManager's hook points installed beside it
// (bench/lib/hook-modes.js), empty (the floor) or doing only the context lookup: splits (b)'s
// cost into its parts. The mechanism is the package's own choice on this runtime.
function withDiagnosticHooks(manager, lookup) {
  const { ThreadContextManager } = require(PACKAGE_ROOT);
  const mechanism = new ThreadContextManager().mechanism;
  const enable = manager.enable.bind(manager);
  manager.enable = () => {
    enable();
    installHooks(mechanism, { active: lookup ? () => manager.active() : null });
    return manager;
  };
  manager.mechanism = mechanism;
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

module.exports = { setupTelemetry };
