'use strict';
// One measured round of a benchmark service: a fresh server process in one mode (pinned), a
// warm-up load, then a measured window bracketed by the server's start/stop messages under a
// second load run, with the server CPU's busy and steal time from /proc/stat around it.

const { startServer, runLoad } = require('./processes');
const { cpuTimes } = require('./machine');

function checkLoad(load, modeKey) {
  if (load.errors > 0 || load.timeouts > 0 || load.non2xx > 0) {
    throw new Error(`mode ${modeKey}: expected no errors, timeouts or non-2xx responses, got ` +
      `${load.errors} errors, ${load.timeouts} timeouts, ${load.non2xx} non-2xx`);
  }
}

/**
 * @param server startServer() options (nodeBin, nodeArgs, script, modeKey, args, env, cpu)
 * @param load runLoad() options without port and seconds (nodeBin, connections, cpu, paths)
 * @param checkReady (ready) => void, throws when the server's self-check failed
 * @param afterStop (stopped) => object merged into the sample (and may throw on bad counts)
 */
// `warmup`: seconds of load before the window, or { requests } for a warm-up by count (a slow
// machine then still warms the JIT up as much as a fast one).
async function measureServerRound({ server: serverOptions, load: loadOptions, warmup, duration, checkReady = () => {}, afterStop = () => ({}) }) {
  const { modeKey, cpu } = serverOptions;
  const server = await startServer(serverOptions);
  try {
    checkReady(server.ready);
    const options = { ...loadOptions, port: server.ready.port };
    checkLoad(await runLoad({ ...options, ...(typeof warmup === 'number' ? { seconds: warmup } : warmup) }), modeKey);
    const cpuBefore = cpuTimes(cpu);
    await server.request('start', 'started');
    const load = await runLoad({ ...options, seconds: duration });
    const stopped = await server.request('stop', 'stopped');
    const cpuAfter = cpuTimes(cpu);
    checkLoad(load, modeKey);
    if (stopped.requests === 0) throw new Error(`mode ${modeKey}: expected requests in the measured window, got 0`);
    const serverUs = stopped.userUs + stopped.systemUs;
    const windowUs = stopped.elapsedNs / 1000;
    return {
      modeKey,
      mechanism: server.ready.mechanism,
      requestsPerSecond: load.requestsPerSecond,
      latencyP99Ms: load.latencyP99Ms,
      requests: stopped.requests,
      // The event-loop thread's CPU (where the hooks and the manager run); process CPU adds V8's
      // and libuv's helper threads (GC, compilation), which move with the machine's noise.
      cpuUsPerRequest: stopped.threadCpuUs / stopped.requests,
      processCpuUsPerRequest: serverUs / stopped.requests,
      // /proc/stat ticks are 10 ms: over a 5 s window this is good to about ±0.5 %.
      foreignPercent: Math.max(0, (cpuAfter.busyUs - cpuBefore.busyUs - serverUs) / windowUs * 100),
      stealPercent: (cpuAfter.stealUs - cpuBefore.stealUs) / windowUs * 100,
      ...afterStop(stopped),
    };
  } finally {
    await server.stop();
  }
}

module.exports = { measureServerRound, checkLoad };
