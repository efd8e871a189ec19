'use strict';
// The services' OpenTelemetry setup, as the README wires it: NodeSDK with auto-instrumentation,
// and, when SERVICE_CONTEXT=thread, otel-thread-ctx's context manager as the one extra line
// (SERVICE_CONTEXT=stock: NodeSDK's own AsyncLocalStorage manager, the package off). Spans are
// batched and exported as usual, then counted and dropped: the SDK's cost is paid in every mode,
// the network's is not. The parent asks for the count over IPC ({ spans: n } back).
const { NodeSDK } = require('@opentelemetry/sdk-node');
const { getNodeAutoInstrumentations } = require('@opentelemetry/auto-instrumentations-node');
const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');

const mode = process.env.SERVICE_CONTEXT;
if (mode !== 'thread' && mode !== 'stock') throw new TypeError(`SERVICE_CONTEXT: expected thread or stock, got ${JSON.stringify(mode)}`);

let spans = 0;
const exporter = {
  export(batch, done) {
    spans += batch.length;
    done({ code: 0 });
  },
  shutdown: () => Promise.resolve(),
  forceFlush: () => Promise.resolve(),
};

// The package from this working tree (its js/ entry point), as `require('otel-thread-ctx')` would load it.
const contextManager = mode === 'thread'
  ? new (require('../..').ThreadContextManager)({ attributes: ['http.route', 'http.request.method'] })
  : undefined;

const sdk = new NodeSDK({
  serviceName: process.env.OTEL_SERVICE_NAME || 'service-cost',
  ...(contextManager ? { contextManager } : {}),
  spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 500 })],
  instrumentations: [getNodeAutoInstrumentations()],
});
sdk.start();

process.on('message', (m) => {
  if (m === 'spans') process.send({ spans });
});

/** Listens on loopback (PORT, 0: any) and prints {"pid":..,"port":..}; SIGTERM stops it. */
function serve(server) {
  server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
    console.log(JSON.stringify({ pid: process.pid, port: server.address().port }));
  });
  process.on('SIGTERM', () => process.exit(0));
}

module.exports = { serve };
