'use strict';
// The benchmark service, one mode per process: node bench/http/server.js <a|b|c|d>.
// Run by run.js as an IPC child: it reports { type: 'ready', port } once listening on
// 127.0.0.1 (after a self-check of the record), then answers 'start' and 'stop' with its
// main thread's CPU time, process.cpuUsage() and request count over the measured window.

const { modeByKey } = require('./modes');
const { threadTimes } = require('../lib/thread-cpu');

const mode = modeByKey(process.argv[2]);
if (typeof process.send !== 'function') {
  throw new Error('server.js: expected to run as an IPC child of bench/http/run.js (no process.send)');
}

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

let window = null;

function spansExported() {
  return telemetry === null ? 0 : telemetry.exporter.spans;
}

async function onMessage(message) {
  if (message.type === 'start') {
    window = { cpu: process.cpuUsage(), thread: threadTimes(), requests, at: process.hrtime.bigint() };
    process.send({ type: 'started' });
  } else if (message.type === 'stop') {
    if (window === null) throw new Error("server.js: got 'stop' before 'start'");
    const cpu = process.cpuUsage(window.cpu);
    const thread = threadTimes();
    const threadCpuUs = (thread.cpuNs - window.thread.cpuNs) / 1000;
    const elapsedNs = Number(process.hrtime.bigint() - window.at);
    const measured = requests - window.requests;
    window = null;
    // Flushing after the window: the exporter count shows spans were made (2 per request).
    if (telemetry !== null) await telemetry.provider.forceFlush();
    process.send({
      type: 'stopped', userUs: cpu.user, systemUs: cpu.system, threadCpuUs, requests: measured, elapsedNs,
      totalRequests: requests, spansExported: spansExported(),
    });
  } else {
    throw new Error(`server.js: unknown message type ${JSON.stringify(message.type)}`);
  }
}

process.on('message', (message) => {
  onMessage(message).catch((err) => {
    process.send({ type: 'error', message: err.stack });
  });
});
// The parent going away ends the benchmark. Exiting through process.exit() (also on SIGTERM)
// lets --cpu-prof write its profile.
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));

server.listen(0, '127.0.0.1', async () => {
  const { port } = server.address();
  let selfCheck = null;
  if (checker !== null) {
    await selfRequests(port);
    selfCheck = checker.result;
    handle = benchHandler;
  }
  process.send({
    type: 'ready', port, pid: process.pid, node: process.version, mode: mode.name,
    mechanism: telemetry === null ? null : (telemetry.contextManager.mechanism ?? 'AsyncLocalStorage'),
    selfCheck,
  });
});
