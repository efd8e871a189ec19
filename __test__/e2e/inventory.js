'use strict';
// The cross-service end-to-end test's downstream service (graphql-path.test.js): Express 5 with
// NodeSDK and otel-thread-ctx's context manager, called over fetch by gateway.js.
//   /stock/:sku  an even sku burns 20-30 ms of CPU time in recomputeStockLevels, an odd one answers at once
//   /price/:sku  answers at once
//   PORT=0 node __test__/e2e/inventory.js   -> prints {"pid":..,"port":..}
const { NodeSDK } = require('@opentelemetry/sdk-node');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { ExpressInstrumentation } = require('@opentelemetry/instrumentation-express');
const { serve } = require('./serve');
const { ThreadContextManager } = require('../..');

const sdk = new NodeSDK({
  serviceName: process.env.OTEL_SERVICE_NAME || 'inventory',
  contextManager: new ThreadContextManager({ attributes: ['http.route'] }),
  instrumentations: [new HttpInstrumentation(), new ExpressInstrumentation()],
});
sdk.start();
// Required after sdk.start() so that the instrumentations can patch them.
const http = require('node:http');
const express = require('express');

// Burns `ms` of CPU time, not of wall time: on a busy machine the thread waits for a CPU in
// between, and the test selects traces by the CPU inventory burnt.
function recomputeStockLevels(ms) {
  const before = process.cpuUsage();
  let acc = 0;
  // The clock read every 50,000 square roots (~0.1 ms), so that the samples land here, not in it.
  for (;;) {
    for (let i = 0; i < 50_000; i++) acc += Math.sqrt(i);
    const used = process.cpuUsage(before);
    if (used.user + used.system >= ms * 1000) break;
  }
  return Math.round(acc) % 100;
}

const app = express();
app.get('/stock/:sku', (req, res) => {
  const n = Number(/\d+$/.exec(req.params.sku)?.[0] ?? 1);
  const stock = n % 2 === 0 ? recomputeStockLevels(20 + Math.random() * 10) : 7;
  res.json({ sku: req.params.sku, stock });
});
app.get('/price/:sku', (req, res) => res.json({ sku: req.params.sku, price: 9.5 }));

serve(http.createServer(app), sdk);
