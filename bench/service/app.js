'use strict';
// The service benchmark's server, one mode per process (run.js starts it as an IPC child):
//   node bench/service/app.js MODE SOCKET_DIR PORT DATABASE USER [PACKAGE_DIR]
// NodeSDK with instrumentation-http, instrumentation-express and instrumentation-pg, spans
// batched into an exporter that drops them; an Express app on 127.0.0.1 querying PostgreSQL over
// its unix socket. Before reporting ready, manager modes serve a few requests to themselves and
// check that the thread's record shows the active span after each database await.

const { modeByName } = require('./modes');
const { requireIpc, answerMeasurements, announceReady } = require('../lib/server-protocol');

requireIpc('bench/service/app.js');
const [modeName, socketDir, port, database, user, packageDir] = process.argv.slice(2);
const mode = modeByName(modeName);

// OpenTelemetry starts before express, pg and node:http are loaded, so they are instrumented.
function startTelemetry() {
  const { NodeSDK } = require('@opentelemetry/sdk-node');
  const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
  const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
  const { ExpressInstrumentation } = require('@opentelemetry/instrumentation-express');
  const { PgInstrumentation } = require('@opentelemetry/instrumentation-pg');
  const { DroppingExporter } = require('../lib/dropping-exporter');
  const { buildContextManager } = require('../lib/managers');
  const { manager, pkg, mechanism } = buildContextManager(mode.kind, { attributes: mode.attributes, managerOptions: mode.managerOptions, packageDir });
  if (mode.managerOptions?.schema !== undefined && manager.schema !== mode.managerOptions.schema) {
    throw new Error(`mode ${modeName}: the manager publishes with schema ${manager.schema} (${manager.schemaFallback})`);
  }
  const exporter = new DroppingExporter();
  const processor = new BatchSpanProcessor(exporter, { maxQueueSize: 65536, maxExportBatchSize: 1024 });
  const sdk = new NodeSDK({
    serviceName: 'bench-shop',
    contextManager: manager,
    spanProcessors: [processor],
    instrumentations: [new HttpInstrumentation(), new ExpressInstrumentation(), new PgInstrumentation()],
  });
  sdk.start();
  return { sdk, exporter, processor, pkg, mechanism, schema: manager.schema };
}

const telemetry = mode.kind === null ? null : startTelemetry();
const http = require('node:http');
const { Pool } = require('pg');
const { createApp } = require('./routes');

const pool = new Pool({ host: socketDir, port: Number(port), database, user, max: 10 });
const app = createApp(pool);

let requests = 0;
app.use((err, req, res, next) => {
  res.status(500).json({ error: String(err && err.message) });
});
const server = http.createServer((req, res) => {
  requests++;
  app(req, res);
});

// The self-check: pg's query callbacks resume the handler; right after, the record must show
// the handler's active span (what a sampler would see there).
function installRecordCheck() {
  const { trace } = require('@opentelemetry/api');
  const result = { checks: 0, mismatches: [] };
  const query = pool.query.bind(pool);
  pool.query = async (...args) => {
    const value = await query(...args);
    const active = trace.getActiveSpan();
    const seen = telemetry.schema === 'nodejs' ? telemetry.pkg.getFrameSpanContext() : telemetry.pkg.getSpanContext();
    result.checks++;
    if (active === undefined || seen === null || seen.spanId !== active.spanContext().spanId) {
      if (result.mismatches.length < 3) result.mismatches.push(`after a query: record shows ${seen && seen.spanId}, active ${active && active.spanContext().spanId}`);
    }
    return value;
  };
  return { result, restore: () => { pool.query = query; } };
}

function get(path) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: server.address().port, path, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    }).on('error', reject);
  });
}

answerMeasurements({
  requests: () => requests,
  afterWindow: async () => {
    if (telemetry === null) return { spansExported: 0 };
    await telemetry.processor.forceFlush();
    return { spansExported: telemetry.exporter.spans };
  },
});

server.listen(0, '127.0.0.1', async () => {
  try {
    let selfCheck = null;
    if (mode.kind === 'manager') {
      const check = installRecordCheck();
      for (let i = 1; i <= 20; i++) {
        const status = await get(i % 2 ? `/api/customers/${i}` : '/api/products?category=books');
        if (status !== 200) throw new Error(`self-check request: expected status 200, got ${status}`);
      }
      check.restore();
      selfCheck = check.result;
      const sampling = telemetry.pkg.threadInfo().allocations;
      if (mode.managerOptions?.allocations && !sampling.active) throw new Error(`allocation sampling did not start: ${sampling.error}`);
    } else {
      // Every mode serves the same warm-up requests before it is measured.
      for (let i = 1; i <= 20; i++) await get(i % 2 ? `/api/customers/${i}` : '/api/products?category=books');
    }
    announceReady({ port: server.address().port, mode: modeName, mechanism: telemetry?.mechanism ?? null, selfCheck });
  } catch (err) {
    process.send({ type: 'error', message: err.stack });
  }
});
