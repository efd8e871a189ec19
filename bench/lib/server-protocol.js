'use strict';
// The server side of a benchmark service's IPC protocol (the parent is processes.js): 'ready'
// once listening, then 'start' and 'stop' bracket a measured window, answered with the
// event-loop thread's CPU time, process.cpuUsage() and the requests served in it.

const os = require('node:os');
const { threadTimes } = require('./thread-cpu');

function requireIpc(script) {
  if (typeof process.send !== 'function') {
    throw new Error(`${script}: expected to run as an IPC child of a benchmark runner (no process.send)`);
  }
}

/**
 * @param requests () => number of requests served so far
 * @param afterWindow async () => object merged into the 'stopped' reply (e.g. spans exported);
 *   runs after the window closed, so its cost is not measured
 */
function answerMeasurements({ requests, afterWindow = async () => ({}) }) {
  let window = null;
  async function onMessage(message) {
    if (message.type === 'start') {
      // Marks the window for a server under callgrind (bench/service/instructions.js dumps its
      // counters before uv_os_getpriority); one syscall otherwise.
      os.getPriority();
      window = { cpu: process.cpuUsage(), thread: threadTimes(), requests: requests(), at: process.hrtime.bigint() };
      process.send({ type: 'started' });
    } else if (message.type === 'stop') {
      if (window === null) throw new Error("server: got 'stop' before 'start'");
      os.getPriority();
      const cpu = process.cpuUsage(window.cpu);
      const thread = threadTimes();
      const measured = {
        userUs: cpu.user, systemUs: cpu.system, threadCpuUs: (thread.cpuNs - window.thread.cpuNs) / 1000,
        requests: requests() - window.requests, elapsedNs: Number(process.hrtime.bigint() - window.at),
      };
      window = null;
      process.send({ type: 'stopped', ...measured, totalRequests: requests(), ...(await afterWindow()) });
    } else {
      throw new Error(`server: unknown message type ${JSON.stringify(message.type)}`);
    }
  }
  process.on('message', (message) => {
    onMessage(message).catch((err) => process.send({ type: 'error', message: err.stack }));
  });
  // The parent going away ends the benchmark. Exiting through process.exit() (also on SIGTERM)
  // lets --cpu-prof write its profile.
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
}

function announceReady(fields) {
  process.send({ type: 'ready', pid: process.pid, node: process.version, ...fields });
}

module.exports = { requireIpc, answerMeasurements, announceReady };
