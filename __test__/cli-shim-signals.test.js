'use strict';
// The package's `thread-ctx` command (bin/thread-ctx.js, a Node shim around the binary) passes
// SIGINT, SIGTERM and SIGHUP on to the binary and ends as the binary did: with its exit code, or
// killed by the same signal. Under npx, `kill -TERM` of npx ends npm and its shell without passing
// the signal on; the shim then stops the binary, so nothing is left running. A shim killed with
// SIGKILL forwards nothing: the kernel sends the binary SIGTERM (PR_SET_PDEATHSIG). The binary is
// the real `thread-ctx agent` (eBPF: root; skipped visibly otherwise, a failure when
// REQUIRE_EBPF=1), told to sample this test process only.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { ROOT, isRoot, api } = require('./helpers/addon');
const { canRun } = require('./helpers/needs');
const { ENV, release, newService } = require('./helpers/release');

const SHIM = path.join(ROOT, 'bin', 'thread-ctx.js');
const WAIT_MS = 60_000; // for a busy machine: every wait below ends as soon as its condition holds

/** pid → { ppid, comm, state } for every process, from /proc/PID/stat. */
function processTable() {
  const table = new Map();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited while listed
    }
    const close = stat.lastIndexOf(')');
    const [state, ppid] = stat.slice(close + 2).split(' ');
    table.set(Number(entry), { ppid: Number(ppid), comm: stat.slice(stat.indexOf('(') + 1, close), state });
  }
  return table;
}

function descendants(pid, table = processTable()) {
  const found = [];
  const queue = [pid];
  while (queue.length) {
    const p = queue.shift();
    for (const [child, info] of table) {
      if (info.ppid === p) {
        found.push({ pid: child, ...info });
        queue.push(child);
      }
    }
  }
  return found;
}

/** Running: present and not a zombie. */
function running(pid) {
  const info = processTable().get(pid);
  return info !== undefined && info.state !== 'Z';
}

async function until(what, condition) {
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    const value = condition();
    if (value) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`gave up after ${WAIT_MS / 1000} s waiting for ${what}`);
}

// Whether thread-ctx agent can run here (root, for eBPF); else the test is skipped, or fails under REQUIRE_EBPF=1.
function needsEbpf(t) {
  return canRun(t, isRoot ? false : 'the shim tests need root to run thread-ctx agent (eBPF)');
}

/** Starts `cmd args` in `cwd`; resolves once the agent says it is sampling, with stderr so far. */
function startAgent(t, cmd, args, options) {
  const proc = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'], ...options });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  // What it started, as seen once it samples: orphans are no longer its descendants.
  const started = new Set();
  t.after(() => {
    for (const p of [proc.pid, ...started, ...descendants(proc.pid).map((d) => d.pid)]) {
      try { process.kill(p, 'SIGKILL'); } catch { /* already gone */ }
    }
    proc.stderr.destroy();
  });
  const sampling = until('the agent to start sampling', () => stderr.includes('thread-ctx agent: sampling'));
  const ready = Promise.race([sampling, exited.then((e) => { throw new Error(`${cmd} exited early (${JSON.stringify(e)}):\n${stderr}`); })])
    .then(() => { for (const d of descendants(proc.pid)) started.add(d.pid); });
  return { proc, exited, ready, stderr: () => stderr };
}

const agentArgs = (dir) => ['agent', '--pid', String(process.pid), '--interval', '1s', '--pprof-dir', dir];

function tmpDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'otel-thread-ctx-shim-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The agent run by the shim (`node bin/thread-ctx.js agent`), sampling: the shim and the binary. */
async function agentUnderShim(t) {
  api.threadInfo(); // this process publishes: the agent's --pid target
  const agent = startAgent(t, process.execPath, [SHIM, ...agentArgs(tmpDir(t))], { cwd: ROOT });
  await agent.ready;
  const [binary] = descendants(agent.proc.pid).filter((d) => d.comm === 'thread-ctx');
  assert.ok(binary, `no thread-ctx process under the shim ${agent.proc.pid}`);
  return { agent, binary };
}

// The binary stops gracefully on SIGINT and SIGTERM (exit 0: it sends its last window), and has no
// handler for SIGHUP, which kills it: the shim must then die of SIGHUP too.
for (const [signal, expected] of [['SIGTERM', { code: 0, signal: null }], ['SIGINT', { code: 0, signal: null }],
  ['SIGHUP', { code: null, signal: 'SIGHUP' }]]) {
  test(`${signal} to the shim reaches the binary, and the shim ends as the binary did`, { timeout: 120_000 }, async (t) => {
    if (!needsEbpf(t)) return;
    const { agent, binary } = await agentUnderShim(t);
    process.kill(agent.proc.pid, signal);
    const ended = await agent.exited;
    assert.deepEqual(ended, expected, `the shim after ${signal}:\n${agent.stderr()}`);
    assert.equal(running(binary.pid), false, `thread-ctx ${binary.pid} still runs after the shim ended`);
  });
}

test('a binary killed by a signal: the shim dies of the same signal', { timeout: 120_000 }, async (t) => {
  if (!needsEbpf(t)) return;
  const { agent, binary } = await agentUnderShim(t);
  process.kill(binary.pid, 'SIGKILL');
  assert.deepEqual(await agent.exited, { code: null, signal: 'SIGKILL' });
});

test('SIGKILL of the shim, which forwards nothing: the binary gets SIGTERM from the kernel and ends', { timeout: 120_000 }, async (t) => {
  if (!needsEbpf(t)) return;
  const { agent, binary } = await agentUnderShim(t);
  process.kill(agent.proc.pid, 'SIGKILL');
  await agent.exited;
  await until(`thread-ctx ${binary.pid} to end after its shim was killed`, () => !running(binary.pid));
  // SIGTERM is the agent's stop request: it ends its window and says so (its stderr is still ours).
  await until('the agent to say it stopped', () => agent.stderr().includes('thread-ctx agent: stopped'));
});

test('kill -TERM of `npx thread-ctx agent` leaves no shim or binary running', { timeout: 900_000 }, async (t) => {
  if (!needsEbpf(t)) return;
  api.threadInfo();
  const service = newService('service-npx-signals', [release().main]);
  const agent = startAgent(t, 'npx', ['--no', '--offline', 'thread-ctx', ...agentArgs(tmpDir(t))], { cwd: service, env: ENV });
  await agent.ready;
  const tree = descendants(agent.proc.pid);
  const binary = tree.find((d) => d.comm === 'thread-ctx');
  assert.ok(binary, `no thread-ctx binary under npx: ${JSON.stringify(tree)}`);
  const shim = tree.find((d) => d.pid === binary.ppid);
  const shimCommand = shim ? fs.readFileSync(`/proc/${shim.pid}/cmdline`, 'utf8').split('\0') : [];
  assert.ok(shimCommand[1] && shimCommand[1].endsWith('/.bin/thread-ctx'), `the binary's parent is not the shim: ${shimCommand.join(' ')}`);
  process.kill(agent.proc.pid, 'SIGTERM');
  await agent.exited;
  const left = await until('every process npx started to end', () => {
    const still = tree.filter((d) => running(d.pid));
    return still.length === 0 ? [] : null;
  }).catch((err) => {
    const still = tree.filter((d) => running(d.pid)).map((d) => `${d.pid} ${d.comm}`);
    throw new Error(`${err.message}; still running: ${still.join(', ')}\n${agent.stderr()}`);
  });
  assert.deepEqual(left, []);
});

// `npx thread-ctx … 2>&1 | head` once head has gone: every write the binary makes fails with EPIPE.
// The binary ends quietly with its own exit code (no panic, no SIGABRT), and the shim, which writes
// nothing itself, ends with that code. Here `inspect` of a process without a writer: exit 4.
test('output into a closed pipe: the binary ends with its own code and the shim passes it on', { timeout: 60_000 }, async (t) => {
  const sleeper = spawn('sleep', ['60'], { stdio: 'ignore' });
  t.after(() => sleeper.kill('SIGKILL'));
  const proc = spawn(process.execPath, [SHIM, 'inspect', String(sleeper.pid)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  // Closed before the shim has even started the binary: its first write meets a pipe without a reader.
  proc.stdout.destroy();
  proc.stderr.destroy();
  const ended = await new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  assert.deepEqual(ended, { code: 4, signal: null });
});
