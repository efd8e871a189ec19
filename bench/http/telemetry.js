'use strict';
// OpenTelemetry setup of the benchmark service for one mode: a NodeTracerProvider with a
// BatchSpanProcessor feeding an exporter that drops spans (so exporting costs the same in every
// mode), the http instrumentation, and the mode's context manager. Must run before node:http
// is required, so the instrumentation can patch it.

const { DroppingExporter } = require('../lib/dropping-exporter');
const { buildContextManager } = require('../lib/managers');

// Modes (e) and (f) are the stock manager with the ThreadContextManager's hook points beside it,
// empty (the floor) or doing only the context lookup (bench/lib/managers.js): they split (b)'s
// cost into its parts.
const KINDS = { als: ['stock'], 'als+hooks': ['floor'], 'als+hooks+lookup': ['lookup'], tcm: ['manager'], 'tcm-cheap': ['manager', { asyncTracking: false }] };

function createContextManager(modeName) {
  const kind = KINDS[modeName];
  if (kind === undefined) throw new TypeError(`modeName: expected one of ${Object.keys(KINDS).join(', ')}, got ${JSON.stringify(modeName)}`);
  return buildContextManager(kind[0], { managerOptions: kind[1] }).manager;
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
