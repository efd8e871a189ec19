'use strict';
// The benchmark service, one mode per process: node bench/http/server.js <a|b|c|d>.
// Run by run.js as an IPC child: it reports { type: 'ready', port } once listening on
// 127.0.0.1 (after a self-check of the record), then answers 'start' and 'stop' with its
// main thread's CPU time, process.cpuUsage() and request count over the measured window.

const { modeByKey } = require('./modes');
const { requireIpc, answerMeasurements, announceReady } = require('../lib/server-protocol');

const mode = modeByKey(process.argv[2]);
requireIpc('bench/http/server.js');

// OpenTelemetry must be set up before node:http is loaded, so the instrumentation patches it.
const telemetry = mode.name === 'none' ? null : require('./telemetry').setupTelemetry(mode.name);
const http = require('node:http');
const { createHandler } = require('./handler');
const { createRecordChecker, checkingChildSpan, selfRequests } = require('./self-check');

const inChildSpan = telemetry === null ? (name, fn) => fn() : telemetry.inChildSpan;
const benchHandler = createHandler(inChildSpan);
const tracksRecord = mode.name.startsWith('tcm');
const checker = tracksRecord ? createRecordChecker(mode.name) : null;
let handle = checker === null ? benchHandler : createHandler(checkingChildSpan(inChildSpan, checker.check));

let requests = 0;
const server = http.createServer((req, res) => {
  requests++;
  handle(req, res).catch((err) => {
    res.statusCode = 500;
    res.end(String(err));
  });
});

function spansExported() {
  return telemetry === null ? 0 : telemetry.exporter.spans;
}

answerMeasurements({
  requests: () => requests,
  // Flushing after the window: the exporter count shows spans were made (2 per request).
  afterWindow: async () => {
    if (telemetry !== null) await telemetry.provider.forceFlush();
    return { spansExported: spansExported() };
  },
});

server.listen(0, '127.0.0.1', async () => {
  const { port } = server.address();
  let selfCheck = null;
  if (checker !== null) {
    await selfRequests(port);
    selfCheck = checker.result;
    handle = benchHandler;
  }
  announceReady({
    port, mode: mode.name,
    mechanism: telemetry === null ? null : (telemetry.contextManager.mechanism ?? 'AsyncLocalStorage'),
    selfCheck,
  });
});
