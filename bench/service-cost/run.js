'use strict';
// What the agent's shipped defaults cost the service (as root): the service process's own CPU
// time per request, at a fixed request rate, with and without the agent running host-wide, and
// with and without the package. For each Node version (--nodes) and service (--services: an
// Apollo Server GraphQL gateway with auto-instrumentation, ~16 spans a request, gateway.js; an
// Express service, express-service.js), two copies run side by side all along: one with the
// package's ThreadContextManager (SERVICE_CONTEXT=thread, the README's wiring), one with NodeSDK's
// own context manager (stock: the package off). Each round has three agent phases, their order
// rotated round by round (bench/lib/rounds.js's rule):
//   none      no agent
//   shipped   `thread-ctx agent` with the shipped flags (deploy/systemd/agent.env: --interval
//             10s --off-cpu --hz 99), host-wide, exporting to the test Collector
//   cpu-only  the same without --off-cpu (what the sched_switch program adds is the difference)
//   probe     no agent: `thread-ctx record PID --off-cpu --hz 99 --bpf-stats` on each package
//             copy in turn, the programs timing themselves (what each costs a request, bottom-up:
//             more precise than a difference of two noisy CPU figures), and on Node 24 again
//             with --no-user-stacks (the stack walk's part)
// and, in each phase, every service copy gets --seconds of open-loop load at its --rps (after a
// second's lead-in), one at a time. The metric: the copy's CPU time (the sum over its threads of
// the scheduler's run time, /proc/PID/task/*/schedstat: utime + stime at ns resolution) over the
// requests it answered in the window; also its context switches (times a thread was switched in)
// per request. The agent runs at nice 19; its own CPU is not counted: the BPF programs' time is,
// as the kernel charges it to the thread they run in (the switching or interrupted one).
//   node bench/service-cost/run.js [--nodes 22,24,26] [--services gateway,express] [--rounds 3]
//                                  [--seconds 3] [--gateway-rps 30] [--express-rps 60]
//                                  [--bin target/release/thread-ctx] [--json FILE]
//                                  [--phases none,shipped,cpu-only,probe] [--probe-bins BIN,BIN] [--copies 1]
// Installs its services' dependencies on first use (npm ci in bench/service-cost).
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');
const { root, track, waitFor, startCollector, bpfPrograms, enableBpfStats, sleep } = require('../lib/agent-bench');
const { positiveInteger } = require('../lib/args');
const { resolveNode, nodeVersion } = require('../lib/node-binary');
const { spread, pairedRatio } = require('../lib/stats');
const { shippedAgentArgs } = require('../../__test__/helpers/shipped-agent');

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '22,24,26' },
    services: { type: 'string', default: 'gateway,express' },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '3' },
    'gateway-rps': { type: 'string', default: '30' },
    'express-rps': { type: 'string', default: '60' },
    bin: { type: 'string', default: path.join(root, 'target/release/thread-ctx') },
    'probe-bins': { type: 'string' },
    phases: { type: 'string', default: 'none,shipped,cpu-only,probe' },
    copies: { type: 'string', default: '1' },
    json: { type: 'string' },
  },
});
const SERVICES = {
  gateway: { script: 'gateway.js', rps: positiveInteger('gateway-rps', values['gateway-rps']) },
  express: { script: 'express-service.js', rps: positiveInteger('express-rps', values['express-rps']) },
};
const services = values.services.split(',');
for (const s of services) if (!SERVICES[s]) throw new RangeError(`--services: expected some of gateway, express, got ${JSON.stringify(s)}`);
const ROUNDS = positiveInteger('rounds', values.rounds);
// Processes per context: with 2, the spread between two processes of the same service and
// context is measured beside the package's difference (which compares two processes too).
const COPIES = positiveInteger('copies', values.copies);
const SECONDS = positiveInteger('seconds', values.seconds);
const BIN = path.resolve(values.bin);
// The probe phase's binaries, each timing its programs on every package copy in turn: builds
// compared side by side (a BPF change's cost per interval on these services).
const PROBE_BINS = (values['probe-bins'] ?? values.bin).split(',').map((b) => path.resolve(b));
for (const b of PROBE_BINS) if (!fs.existsSync(b)) throw new Error(`--probe-bins: no ${b}`);
for (const s of services) if (SERVICES[s].rps > 1000) throw new RangeError(`--${s}-rps: expected at most 1000 requests a second, got ${SERVICES[s].rps}`);
if (process.getuid() !== 0) throw new Error('the agent needs root (eBPF): run with sudo');
if (!fs.existsSync(BIN)) throw new Error(`--bin: no ${BIN}: run cargo build --release first`);
const nodes = values.nodes.split(',').map((major) => ({ major, bin: resolveNode(major) }));

// The --no-user-stacks probe on this Node only (the one the done-criterion names), to keep the run short.
const PROBE_NO_STACKS = nodes.some((n) => n.major === '24') ? '24' : nodes[0].major;
const HERE = __dirname;
if (!fs.existsSync(path.join(HERE, 'node_modules', '@apollo', 'server'))) {
  execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: HERE, stdio: 'inherit' });
}

const SHIPPED = shippedAgentArgs().systemd;
const ALL_PHASES = { none: null, shipped: SHIPPED, 'cpu-only': SHIPPED.filter((a) => a !== '--off-cpu'), probe: null };
const PHASES = {};
for (const p of values.phases.split(',')) {
  if (!(p in ALL_PHASES)) throw new RangeError(`--phases: expected some of ${Object.keys(ALL_PHASES).join(', ')}, got ${JSON.stringify(p)}`);
  PHASES[p] = ALL_PHASES[p];
}
const GATEWAY_QUERY = JSON.stringify({ query: '{ product(sku: "a1") { sku name stock price reviews { author rating } } }' });

/** A process's CPU time (ns) and times its threads were switched in, summed over its live threads. */
function processTimes(pid) {
  let cpuNs = 0;
  let switches = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const [run, , slices] = fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').trim().split(/\s+/).map(Number);
      cpuNs += run;
      switches += slices;
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return { cpuNs, switches };
}

function startProcess(bin, script, env) {
  const child = track(spawn(bin, [path.join(HERE, script)], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] }));
  return waitFor(child, '}').then((out) => ({ child, ...JSON.parse(out.trim().split('\n').pop()) }));
}

/** Open-loop load on one service copy: `rps` requests a second whatever the answers take. */
function startLoad(service, port, rps) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  let answered = 0;
  let failed = 0;
  let owed = 0;
  const one = () => {
    const gateway = service === 'gateway';
    const req = http.request({
      host: '127.0.0.1', port, agent,
      method: gateway ? 'POST' : 'GET',
      path: gateway ? '/' : '/api/items/shoes?limit=50',
      headers: gateway ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(GATEWAY_QUERY) } : {},
    }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? answered++ : failed++));
    });
    req.on('error', () => failed++);
    req.end(gateway ? GATEWAY_QUERY : undefined);
  };
  const timer = setInterval(() => {
    for (owed += rps / 100; owed >= 1; owed--) one();
  }, 10);
  return { stop: () => (clearInterval(timer), agent.destroy()), counts: () => ({ answered, failed }) };
}

/** One window on one copy: its CPU ns and switches per answered request. */
async function window(copy) {
  const load = startLoad(copy.service, copy.port, SERVICES[copy.service].rps);
  await sleep(1000); // lead-in: connections open, the code hot again after the idle time
  const a0 = load.counts().answered;
  const t0 = processTimes(copy.pid);
  await sleep(SECONDS * 1000);
  const t1 = processTimes(copy.pid);
  const { answered, failed } = load.counts();
  load.stop();
  const requests = answered - a0;
  if (requests < SECONDS * SERVICES[copy.service].rps * 0.5) throw new Error(`${copy.label}: only ${requests} requests answered in ${SECONDS} s (${failed} failed)`);
  return { requests, failed, cpuUsPerRequest: (t1.cpuNs - t0.cpuNs) / 1000 / requests, switchesPerRequest: (t1.switches - t0.switches) / requests, corePct: (100 * (t1.cpuNs - t0.cpuNs)) / 1e9 / SECONDS };
}

/**
 * The BPF programs' own cost on one package copy, from their own clock: `thread-ctx record PID
 * --off-cpu --hz 99 --bpf-stats` (the shipped programs and rate, on this process only) over a
 * window of load; with `noStacks`, --no-user-stacks (what the stack walk is of it). Gives the
 * off-CPU program's ns per interval (switched out and back in) and intervals per request, the
 * share of intervals with a span, and the CPU program's ns per sample and samples per request.
 */
async function probe(copy, noStacks, bin) {
  const rps = SERVICES[copy.service].rps;
  const load = startLoad(copy.service, copy.port, rps);
  await sleep(1000);
  const a0 = load.counts().answered;
  const args = ['record', String(copy.pid), '--off-cpu', '--hz', '99', '--bpf-stats', '--duration', `${SECONDS}s`, '--format', 'jsonl', ...(noStacks ? ['--no-user-stacks'] : [])];
  const r = await new Promise((resolve) => {
    const c = track(spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    let out = '';
    let err = '';
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (err += d));
    c.on('exit', () => resolve({ out, err }));
  });
  const requests = load.counts().answered - a0;
  load.stop();
  const events = r.out.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const withSpan = (e) => e.trace_id && !/^0+$/.test(e.trace_id);
  const offCpu = events.filter((e) => e.kind === 'off_cpu');
  const cpu = events.filter((e) => e.kind === 'cpu');
  const nsPerInterval = Number((r.err.match(/ (\d+) ns per off-CPU interval of the target/) || [])[1]);
  const nsPerSample = Number((r.err.match(/ (\d+) ns per sample of the target \(its own clock\)/) || [])[1]);
  if (!(nsPerInterval > 0)) throw new Error(`${copy.label}: record printed no per-interval time: ${r.err.slice(-400)}`);
  return {
    requests,
    intervalsPerRequest: offCpu.length / requests,
    intervalsWithSpan: offCpu.filter(withSpan).length / Math.max(1, offCpu.length),
    nsPerInterval,
    samplesPerRequest: cpu.length / requests,
    nsPerSample,
  };
}

const PROGRAMS = ['sample_thread_ctx', 'off_cpu_switch'];

/** The agent with `args`, host-wide, at nice 19; resolves once its targets map holds every `pids`. */
async function startAgent(args, endpoint, pids) {
  const mapsBefore = new Set(bpfMaps().map((m) => m.id));
  const agent = track(spawn('nice', ['-n', '19', BIN, 'agent', ...args, '--endpoint', endpoint, '--protocol', 'grpc'], { stdio: ['ignore', 'ignore', 'pipe'] }));
  let stderr = '';
  agent.stderr.on('data', (d) => (stderr += d));
  for (let i = 0; i < 300; i++) {
    await sleep(100);
    if (agent.exitCode !== null) throw new Error(`the agent exited ${agent.exitCode}: ${stderr.slice(-400)}`);
    const tracked = bpfMaps().filter((m) => m.name === 'targets' && !mapsBefore.has(m.id)).map((m) => trackedPids(m.id));
    if (tracked.some((set) => pids.every((p) => set.has(p)))) return { agent, stderr: () => stderr };
  }
  throw new Error(`the agent did not track the services' processes ${pids.join(', ')} within 30 s: ${stderr.slice(-400)}`);
}

function bpfMaps() {
  try {
    return JSON.parse(execFileSync('bpftool', ['map', 'show', '-j']).toString());
  } catch {
    return [];
  }
}

/** The tgids in a targets map (its u32 keys). */
function trackedPids(id) {
  try {
    const entries = JSON.parse(execFileSync('bpftool', ['map', 'dump', 'id', String(id), '-j']).toString());
    return new Set(entries.map((e) => Buffer.from(e.key.map((b) => Number(b))).readUInt32LE(0)));
  } catch {
    return new Set();
  }
}

function stopAgent(agent) {
  return new Promise((resolve) => {
    agent.on('exit', resolve);
    agent.kill('SIGTERM');
  });
}

(async () => {
  const started = new Date();
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root }).toString().trim();
  const { endpoint } = (await startCollector()) ?? {};
  if (!endpoint) throw new Error('no test Collector: run scripts/build-collector.sh (the agent exports to it, as shipped)');
  const downstream = await startProcess(process.execPath, 'downstream.js', {});
  const copies = [];
  for (const { major, bin } of nodes) {
    for (const service of services) {
      for (let copy = 1; copy <= COPIES; copy++) {
        for (const context of ['thread', 'stock']) {
          const p = await startProcess(bin, SERVICES[service].script, { SERVICE_CONTEXT: context, DOWNSTREAM_URL: `http://127.0.0.1:${downstream.port}`, OTEL_SERVICE_NAME: `${service}-${context}` });
          const suffix = copy > 1 ? ` #${copy}` : '';
          copies.push({ ...p, major, version: nodeVersion(bin), service, context: context + suffix.replace(' ', ''), label: `node ${major} ${service} ${context === 'thread' ? 'package' : 'stock'}${suffix}` });
        }
      }
    }
  }
  // Warm-up: every copy's code compiled and optimised before the first window.
  for (const copy of copies) {
    const load = startLoad(copy.service, copy.port, SERVICES[copy.service].rps);
    await sleep(3000);
    load.stop();
  }
  const restoreBpfStats = enableBpfStats();
  const samples = [];
  const phases = Object.keys(PHASES);
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      const shift = (round - 1) % phases.length;
      for (const phase of [...phases.slice(shift), ...phases.slice(0, shift)]) {
        const programsBefore = new Set(bpfPrograms(PROGRAMS).map((p) => p.id));
        const agent = PHASES[phase] && (await startAgent(PHASES[phase], endpoint, copies.filter((c) => c.context.startsWith('thread')).map((c) => c.pid)));
        // This agent's programs: loaded since it started (another agent on the host has its own).
        const bpf0 = bpfPrograms(PROGRAMS).filter((p) => !programsBefore.has(p.id));
        const t0 = process.hrtime.bigint();
        // The copies' order rotates too, so that none always follows the agent's start.
        const order = [...copies.slice(round % copies.length), ...copies.slice(0, round % copies.length)];
        for (const copy of order) {
          if (phase === 'probe') {
            if (copy.context !== 'thread') continue;
            const bins = [...PROBE_BINS.slice(round % PROBE_BINS.length), ...PROBE_BINS.slice(0, round % PROBE_BINS.length)];
            for (const [bin, noStacks] of bins.flatMap((b) => (copy.major === PROBE_NO_STACKS ? [[b, false], [b, true]] : [[b, false]]))) {
              const s = { ...(await probe(copy, noStacks, bin)), round, phase: noStacks ? 'probe-no-stacks' : 'probe', bin, label: copy.label, major: copy.major, service: copy.service, load: os.loadavg()[0] };
              samples.push(s);
              process.stderr.write(`round ${round} ${s.phase}: ${copy.label}${PROBE_BINS.length > 1 ? ` (${path.relative(root, bin)})` : ''}: off-CPU ${s.nsPerInterval} ns/interval × ${s.intervalsPerRequest.toFixed(1)}/request (${(100 * s.intervalsWithSpan).toFixed(0)} % with a span), CPU ${s.nsPerSample} ns/sample × ${s.samplesPerRequest.toFixed(2)}/request\n`);
            }
            continue;
          }
          // In the phases with an agent, the stock copies only in `shipped` (a process that
          // publishes nothing: what the host-wide programs cost every other process).
          if (phase === 'cpu-only' && copy.context.startsWith('stock')) continue;
          const s = { ...(await window(copy)), round, phase, label: copy.label, major: copy.major, service: copy.service, context: copy.context, load: os.loadavg()[0] };
          samples.push(s);
          process.stderr.write(`round ${round} ${phase}: ${copy.label}: ${s.cpuUsPerRequest.toFixed(0)} µs CPU/request, ${s.switchesPerRequest.toFixed(1)} switches/request (load ${s.load.toFixed(1)})\n`);
        }
        const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
        if (agent) {
          const bpf1 = bpfPrograms(PROGRAMS);
          await stopAgent(agent.agent);
          for (const name of PROGRAMS) {
            const was = bpf0.find((y) => y.name === name);
            const p = was && bpf1.find((x) => x.id === was.id);
            if (p && was) samples.push({ round, phase, bpf: name, runsPerSecond: (p.run_cnt - was.run_cnt) / seconds, nsPerRun: (p.run_time_ns - was.run_time_ns) / Math.max(1, p.run_cnt - was.run_cnt), corePct: (100 * (p.run_time_ns - was.run_time_ns)) / 1e9 / seconds });
          }
        }
      }
    }
  } finally {
    restoreBpfStats();
  }
  for (const copy of copies) copy.child.kill('SIGKILL');
  downstream.child.kill('SIGKILL');
  if (values.json) fs.writeFileSync(values.json, JSON.stringify({ started, commit, samples }, null, 1));
  report(samples, started, commit, (Date.now() - started) / 60000);
  process.exit(0);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});

function report(samples, started, commit, minutes) {
  const windows = samples.filter((s) => s.label && !s.phase.startsWith('probe'));
  const loads = samples.filter((s) => s.load !== undefined).map((s) => s.load);
  const f = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : '-');
  console.log(`Service CPU per request, bench/service-cost/run.js at ${commit}, ${started.toISOString()} (${minutes.toFixed(1)} min): ${ROUNDS} rounds, ${SECONDS} s windows, gateway ${SERVICES.gateway.rps} requests/s, express ${SERVICES.express.rps} requests/s, ` +
    `agent \`${SHIPPED.join(' ')}\` host-wide at nice 19; ${os.cpus().length} CPUs, load ${f(Math.min(...loads), 1)}-${f(Math.max(...loads), 1)}`);
  console.log('\n| Node | service | package | agent | CPU µs per request, median [min, max] | switches per request, median |');
  console.log('|---|---|---|---|---|---|');
  const cells = [];
  for (const s of windows) if (!cells.some((c) => c.label === s.label && c.phase === s.phase)) cells.push(s);
  for (const c of cells) {
    const mine = windows.filter((s) => s.label === c.label && s.phase === c.phase);
    const cpu = spread(mine.map((s) => s.cpuUsPerRequest));
    console.log(`| ${c.major} | ${c.service} | ${c.context.replace('thread', 'on').replace('stock', 'off')} | ${c.phase} | ${f(cpu.median)} [${f(cpu.min)}, ${f(cpu.max)}] | ${f(spread(mine.map((s) => s.switchesPerRequest)).median, 1)} |`);
  }
  // Same-round ratios: each pair measured within minutes of each other.
  console.log('\n| Node | service | what | ratio of CPU per request, median (95 % interval) |');
  console.log('|---|---|---|---|');
  const key = (s) => `${s.context}/${s.phase}`;
  const pairs = [
    // Two processes: their own spread (layout, JIT, GC timing) is in this ratio, unlike the
    // agent's rows, which compare one process with itself.
    ['package (no agent; two processes)', 'thread/none', 'stock/none'],
    ['shipped agent, package on', 'thread/shipped', 'thread/none'],
    ['  of which CPU sampling (cpu-only vs none)', 'thread/cpu-only', 'thread/none'],
    ['  of which --off-cpu (shipped vs cpu-only)', 'thread/shipped', 'thread/cpu-only'],
    ['package + shipped agent vs neither (two processes)', 'thread/shipped', 'stock/none'],
    ['shipped agent on a process that publishes nothing', 'stock/shipped', 'stock/none'],
    // --copies 2: the same context, two processes (what the two-process rows' spread alone is).
    ['stock, second process ÷ first (no agent)', 'stock#2/none', 'stock/none'],
    ['package, second process ÷ first (no agent)', 'thread#2/none', 'thread/none'],
  ];
  const majors = [...new Set(samples.filter((s) => s.major).map((s) => s.major))];
  for (const major of majors) {
    for (const service of [...new Set(windows.map((s) => s.service))]) {
      const mine = windows.filter((s) => s.major === major && s.service === service).map((s) => ({ ...s, mode: key(s) }));
      for (const [what, mode, base] of pairs) {
        const r = pairedRatio(mine, mode, base, (s) => s.cpuUsPerRequest);
        if (r) console.log(`| ${major} | ${service} | ${what} | ${f(r.median, 3)} (${f(r.lo, 3)}-${f(r.hi, 3)})${r.inNoise ? ', in the noise' : ''} |`);
      }
    }
  }
  // Bottom-up: what each program costs a request, from its own clock (probe phase) over the CPU
  // per request without an agent (package on), same Node and service.
  const probes = samples.filter((s) => s.phase?.startsWith('probe'));
  if (probes.length) {
    console.log('\n| Node | service | binary | user stacks | off-CPU intervals per request (with a span) | ns per interval (out and in) | off-CPU program, µs per request (% of CPU per request) | CPU samples per request | ns per sample | CPU program, µs per request (%) |');
    console.log('|---|---|---|---|---|---|---|---|---|---|');
    for (const major of majors) {
      for (const service of [...new Set(probes.map((s) => s.service))]) {
        for (const [bin, phase] of PROBE_BINS.flatMap((b) => [[b, 'probe'], [b, 'probe-no-stacks']])) {
          const mine = probes.filter((s) => s.major === major && s.service === service && s.phase === phase && s.bin === bin);
          if (!mine.length) continue;
          const m = (k) => spread(mine.map((s) => s[k])).median;
          const noAgent = windows.filter((s) => s.major === major && s.service === service && s.context === 'thread' && s.phase === 'none');
          const base = noAgent.length ? spread(noAgent.map((s) => s.cpuUsPerRequest)).median : NaN;
          const offUs = (m('nsPerInterval') * m('intervalsPerRequest')) / 1000;
          const cpuUs = (m('nsPerSample') * m('samplesPerRequest')) / 1000;
          console.log(`| ${major} | ${service} | ${path.relative(root, bin)} | ${phase === 'probe' ? 'yes' : 'no'} | ${f(m('intervalsPerRequest'), 1)} (${f(100 * m('intervalsWithSpan'))} %) | ${f(m('nsPerInterval'))} | ${f(offUs, 1)} (${f((100 * offUs) / base, 2)} %) | ${f(m('samplesPerRequest'), 2)} | ${f(m('nsPerSample'))} | ${f(cpuUs, 1)} (${f((100 * cpuUs) / base, 2)} %) |`);
        }
      }
    }
  }
  const bpf = samples.filter((s) => s.bpf);
  if (bpf.length) {
    console.log('\n| agent | BPF program | runs/s (host-wide), median | ns per run, median | share of a core, median |');
    console.log('|---|---|---|---|---|');
    for (const phase of ['shipped', 'cpu-only']) {
      for (const name of PROGRAMS) {
        const mine = bpf.filter((s) => s.phase === phase && s.bpf === name);
        if (!mine.length) continue;
        const m = (k) => spread(mine.map((s) => s[k])).median;
        console.log(`| ${phase} | ${name} | ${f(m('runsPerSecond'))} | ${f(m('nsPerRun'))} | ${f(m('corePct'), 2)} % |`);
      }
    }
  }
}
