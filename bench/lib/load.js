'use strict';
// The load generator: one bounded autocannon run against a benchmark server on 127.0.0.1, printed
// as one JSON line on stdout. processes.js starts it pinned to the client CPU. Each connection
// cycles through the comma-separated paths.
//   node bench/lib/load.js <port> <seconds | Nreq> <connections> <path[,path...]> [timeout seconds]
// (a duration in seconds, or e.g. 3000req: exactly that many requests, for a warm-up by count;
// the timeout per request is autocannon's 10 s unless given: a server under valgrind needs more).

const autocannon = require('autocannon');

function positiveInteger(name, text) {
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) {
    throw new TypeError(`${name}: expected a positive integer, got ${JSON.stringify(text)}`);
  }
  return value;
}

async function main() {
  const [portText, secondsText, connectionsText, pathsText = '/', timeoutText = '10'] = process.argv.slice(2);
  const port = positiveInteger('port', portText);
  const byCount = /^\d+req$/.test(secondsText);
  const length = byCount ? { amount: positiveInteger('requests', secondsText.slice(0, -3)) } : { duration: positiveInteger('seconds', secondsText) };
  const connections = positiveInteger('connections', connectionsText);
  const result = await autocannon({
    url: `http://127.0.0.1:${port}`,
    requests: pathsText.split(',').map((path) => ({ method: 'GET', path })),
    connections,
    ...length,
    pipelining: 1,
    timeout: positiveInteger('timeout', timeoutText),
  });
  process.stdout.write(JSON.stringify({
    requestsPerSecond: result.requests.average,
    requestsTotal: result.requests.total,
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    durationS: result.duration,
  }) + '\n');
}

main().catch((err) => {
  process.stderr.write(`load.js: ${err.stack}\n`);
  process.exit(1);
});
