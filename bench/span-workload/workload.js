'use strict';
// The span workload itself, the same in every mode: `inFlight` requests at a time, each a server
// span with a child span and three awaits (setImmediate, an already-resolved promise inside the
// child span, fs.promises.stat) and a ~1 KB JSON body, on a NodeTracerProvider with a
// BatchSpanProcessor into an exporter that drops spans.

const fs = require('node:fs');
const { SpanKind, trace } = require('@opentelemetry/api');
const { NodeTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-node');
const { DroppingExporter } = require('../lib/dropping-exporter');

const { USER, ORDERS, PREFERENCES } = require('../lib/sample-data');

const STAT_PATH = __filename;

/** Registers the provider with `contextManager`; returns { runRequests, exporter, provider }. */
function createWorkload(contextManager, { inFlight }) {
  const exporter = new DroppingExporter();
  const provider = new NodeTracerProvider({
    spanProcessors: [new BatchSpanProcessor(exporter, { maxQueueSize: 16384, maxExportBatchSize: 512 })],
  });
  provider.register({ contextManager });
  const tracer = trace.getTracer('span-workload');
  let bodyBytes = 0;
  let onRequestAwaited = null; // test hook: called inside the child span after its await

  async function request(id) {
    return tracer.startActiveSpan('GET /api/users/:id', {
      kind: SpanKind.SERVER, attributes: { 'http.request.method': 'GET', 'http.route': '/api/users/:id' },
    }, async (span) => {
      try {
        const user = await new Promise((resolve) => setImmediate(resolve, { ...USER, id }));
        const orders = await tracer.startActiveSpan('db.orders', { attributes: { 'db.system': 'bench' } }, async (child) => {
          try {
            const rows = await Promise.resolve(ORDERS);
            if (onRequestAwaited !== null) onRequestAwaited(child);
            return rows;
          } finally {
            child.end();
          }
        });
        const stat = await fs.promises.stat(STAT_PATH);
        const body = JSON.stringify({ path: '/api/users/' + id, user, orders, preferences: PREFERENCES, size: stat.size, count: orders.length });
        bodyBytes += body.length;
        span.setAttribute('http.response.status_code', 200);
      } finally {
        span.end();
      }
    });
  }

  // `total` requests, `inFlight` at a time, each lane started in the root context.
  async function runRequests(total) {
    let started = 0;
    async function lane() {
      while (started < total) await request(started++);
    }
    await Promise.all(Array.from({ length: inFlight }, lane));
  }

  return {
    runRequests,
    exporter,
    provider,
    bodyBytes: () => bodyBytes,
    onChildAwaited(fn) { onRequestAwaited = fn; },
  };
}

module.exports = { createWorkload };
