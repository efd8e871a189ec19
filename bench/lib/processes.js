'use strict';
// A benchmark's child processes, each pinned to its CPU with taskset: a server (an IPC child
// speaking server-protocol.js's ready/start/stop messages) and one autocannon run (load.js).

const path = require('node:path');
const { spawn } = require('node:child_process');

const LOAD = path.join(__dirname, 'load.js');
const READY_TIMEOUT_MS = 30_000;

// `script` is run as `node [nodeArgs] script modeKey [args]`; `env` adds to the environment;
// `wrapper` is a command line the node command runs under (e.g. valgrind and its options), and
// `timeoutMs` how long to wait for each of the server's replies (a server under valgrind starts
// and answers tens of times slower).
function startServer({ nodeBin, nodeArgs = [], script, modeKey, args = [], env = {}, cpu, wrapper = [], timeoutMs = READY_TIMEOUT_MS }) {
  const child = spawn('taskset', ['-c', String(cpu), ...wrapper, nodeBin, ...nodeArgs, script, modeKey, ...args], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, OTEL_THREAD_CTX_REQUIRE_NATIVE: '1', ...env },
  });
  const waiting = new Map(); // reply type -> { resolve, reject }
  let exited = null;
  function failAll(err) {
    for (const { reject } of waiting.values()) reject(err);
    waiting.clear();
  }
  child.on('message', (message) => {
    if (message.type === 'error') return failAll(new Error(`server (mode ${modeKey}): ${message.message}`));
    const pending = waiting.get(message.type);
    if (pending !== undefined) {
      waiting.delete(message.type);
      pending.resolve(message);
    }
  });
  child.on('error', (err) => failAll(new Error(`server (mode ${modeKey}): could not start taskset: ${err.message}`)));
  child.on('exit', (code, signal) => {
    exited = { code, signal };
    failAll(new Error(`server (mode ${modeKey}) exited early (code ${code}, signal ${signal})`));
  });
  function expect(type, timeoutMs) {
    return new Promise((resolve, reject) => {
      if (exited !== null) return reject(new Error(`server (mode ${modeKey}) is not running`));
      const timer = setTimeout(() => {
        waiting.delete(type);
        reject(new Error(`server (mode ${modeKey}): expected a '${type}' message within ${timeoutMs} ms, got none`));
      }, timeoutMs);
      waiting.set(type, {
        resolve: (m) => { clearTimeout(timer); resolve(m); },
        reject: (e) => { clearTimeout(timer); reject(e); },
      });
    });
  }
  async function request(type, replyType) {
    const reply = expect(replyType, timeoutMs);
    child.send({ type });
    return reply;
  }
  function stop() {
    if (exited !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.removeAllListeners('exit');
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  }
  return expect('ready', timeoutMs).then((ready) => ({ ready, request, stop }));
}

// `paths`: the request paths each connection cycles through (default: bench:http's one path).
// `requests` instead of `seconds`: exactly that many requests.
// `timeoutSeconds`: per request (autocannon's default, 10 s, unless given).
function runLoad({ nodeBin, port, seconds, requests, connections, cpu, paths = ['/api/users?id=42'], timeoutSeconds = 10 }) {
  const length = requests === undefined ? String(seconds) : `${requests}req`;
  return new Promise((resolve, reject) => {
    const child = spawn('taskset', ['-c', String(cpu), nodeBin, LOAD, String(port), length, String(connections), paths.join(','), String(timeoutSeconds)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk) => { out += chunk; });
    child.on('error', (err) => reject(new Error(`load generator: could not start taskset: ${err.message}`)));
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`load generator: expected exit code 0, got ${code}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()));
      } catch (err) {
        reject(new Error(`load generator: expected one JSON line on stdout, got ${JSON.stringify(out.slice(0, 200))}`));
      }
    });
  });
}

// Interrupted (Ctrl-C, kill): runs `cleanUp` (what must not outlive the benchmark, such as its
// PostgreSQL server and temporary directories) and exits 130.
function cleanUpOnInterrupt(cleanUp) {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.once(signal, () => {
      cleanUp();
      process.exit(130);
    });
  }
}

module.exports = { startServer, runLoad, cleanUpOnInterrupt };
