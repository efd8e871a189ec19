'use strict';
// What the agent benchmarks (bench/agent/run.js, features.js, coverage.js) share: the processes
// they start (killed however the benchmark ends), an agent's CPU time and peak RSS from /proc,
// waiting for a line, the test Collector the agent exports to, the BPF programs an agent loads,
// and an open-loop load on the demo service.
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '../..');
const collectorBin = path.join(root, 'target/otelcol/otelcol-thread-ctx');

// Every process the benchmark starts is killed however it ends (an error, Ctrl-C): twenty busy
// services left behind would load the machine long after.
const started = new Set();
function track(child) {
  started.add(child);
  child.on('exit', () => started.delete(child));
  return child;
}
process.on('exit', () => {
  for (const c of started) c.kill('SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(1));

const clk = Number(execFileSync('getconf', ['CLK_TCK']).toString());
/** A process's CPU time so far (utime + stime), in seconds. */
function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / clk;
}
/** CPU seconds of each of a process's threads so far, summed by thread name (its stages:
 * the sampling loop, `symbolize`, `discovery`, the exporter's). Threads that exited are not
 * counted, so take the difference of two readings of a long-lived process. */
function threadCpuSeconds(pid) {
  const byName = {};
  let tids = [];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return byName;
  }
  for (const tid of tids) {
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // exited between the listing and the read
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    byName[name] = (byName[name] || 0) + (Number(f[11]) + Number(f[12])) / clk;
  }
  return byName;
}
/** A process's peak RSS (VmHWM), in MiB. */
function peakRssMiB(pid) {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmHWM:\s+(\d+) kB/);
  return m ? Number(m[1]) / 1024 : NaN;
}
function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}
/** Resolves with what the child printed (stdout and stderr) once it printed `text`. */
function waitFor(child, text) {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`no "${text}" within 60 s: ${seen.slice(-400)}`)), 60000);
    const onData = (d) => {
      seen += d;
      if (seen.includes(text)) {
        clearTimeout(timer);
        resolve(seen);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
  });
}

/** The test Collector (discarding what it receives), its OTLP/gRPC endpoint and its OTLP/HTTP
 * traces endpoint; null when it is not built. */
async function startCollector() {
  if (!fs.existsSync(collectorBin)) return null;
  const [grpc, http] = [await freePort(), await freePort()];
  const collector = track(spawn(collectorBin, ['--config', path.join(root, 'collector/config.yaml'), '--feature-gates=+service.profilesSupport'], {
    env: { ...process.env, OTELCOL_GRPC_ENDPOINT: `127.0.0.1:${grpc}`, OTELCOL_HTTP_ENDPOINT: `127.0.0.1:${http}`, OTELCOL_OUTPUT: '/dev/null' },
    stdio: ['ignore', 'pipe', 'pipe'],
  }));
  await waitFor(collector, 'Everything is ready');
  return { collector, endpoint: `http://127.0.0.1:${grpc}`, tracesEndpoint: `http://127.0.0.1:${http}/v1/traces` };
}

/** The BPF programs loaded now whose name is one of `names` (bpftool), with their kernel stats. */
function bpfPrograms(names) {
  try {
    return JSON.parse(execFileSync('bpftool', ['prog', 'show', '-j']).toString()).filter((x) => names.includes(x.name));
  } catch {
    return [];
  }
}

/** Turns kernel BPF stats on; returns what restores the setting. */
function enableBpfStats() {
  try {
    const was = fs.readFileSync('/proc/sys/kernel/bpf_stats_enabled', 'utf8').trim();
    fs.writeFileSync('/proc/sys/kernel/bpf_stats_enabled', '1');
    return () => fs.writeFileSync('/proc/sys/kernel/bpf_stats_enabled', was);
  } catch {
    return () => {};
  }
}

// The demo service's three routes (demo/service.js), as a client asks for them.
const DEMO_PATHS = ['/api/report', '/api/search?q=shoes', '/api/users/7'];

/** Open-loop load: `rps` requests a second over `paths` in turn, whatever the answers take;
 * counts() gives what was sent, answered (in all, and per path) and failed. */
function startLoad(port, rps, paths = DEMO_PATHS) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  const answeredOf = Object.fromEntries(paths.map((p) => [p, 0]));
  let sent = 0;
  let answered = 0;
  let failed = 0;
  const timer = setInterval(() => {
    for (let i = 0; i < rps / 100; i++) {
      const p = paths[sent++ % paths.length];
      const req = http.get({ host: '127.0.0.1', port, path: p, agent }, (res) => {
        res.resume();
        res.on('end', () => (answered++, answeredOf[p]++));
      });
      req.on('error', () => failed++);
    }
  }, 10);
  return { stop: () => (clearInterval(timer), agent.destroy()), counts: () => ({ sent, answered, failed, answeredOf: { ...answeredOf } }) };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const loadAverage = () => os.loadavg()[0];

module.exports = { root, track, cpuSeconds, threadCpuSeconds, peakRssMiB, freePort, waitFor, startCollector, bpfPrograms, enableBpfStats, startLoad, DEMO_PATHS, sleep, loadAverage };
