'use strict';
// What each of the agent's event kinds costs on a busy instrumented HTTP service (as root): the
// demo service (demo/service.js: NodeSDK, HTTP instrumentation, this package's context manager,
// V8's sampling heap profiler on) under an open-loop load of --rps requests a second, profiled by
// `thread-ctx agent --hz 19` in modes alternated round after round (bench/lib/rounds.js):
//   cpu       CPU samples only (the default agent)
//   off-cpu   --off-cpu (every switch of the service's threads out and back in)
//   alloc     --alloc (V8's allocation samples, through a uprobe)
//   all       --off-cpu --alloc
// For each: the agent's own CPU (utime + stime, as a share of one core: the mean over the run
// and the highest 1-second share), its peak RSS, the events of each kind per second, and the BPF
// programs' run time (kernel BPF stats: ns per run and the share of a core all runs took, which
// the kernel charges to the threads it interrupts, not to the agent). Per event kind, what it
// costs the agent: the CPU mode's agent time per CPU sample, and the agent time a mode adds over
// the CPU mode of the same round per off-CPU interval or allocation sample.
//   node bench/agent/features.js [--seconds 60] [--hz 19] [--rps 95] [--modes cpu,off-cpu,alloc,all]
//                                [--bins PATH,PATH] [--rounds 3]
// Exports OTLP over gRPC to the repository's test Collector when it is built, else pprof files.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { root, track, cpuSeconds, peakRssMiB, waitFor, startCollector, bpfPrograms, enableBpfStats, sleep, startLoad } = require('../lib/agent-bench');
const { alternate } = require('../lib/rounds');
const { spread } = require('../lib/stats');

const { option } = require('../lib/args');
const SECONDS = Number(option('seconds', '60'));
const HZ = Number(option('hz', '19'));
const RPS = Number(option('rps', '95'));
const ROUNDS = Number(option('rounds', '3'));
const BINS = option('bins', path.join(root, 'target/release/thread-ctx')).split(',').map((b) => path.resolve(b));
const FLAGS = { cpu: [], 'off-cpu': ['--off-cpu'], alloc: ['--alloc'], all: ['--off-cpu', '--alloc'] };
const MODES = option('modes', 'cpu,off-cpu,alloc,all').split(',');
for (const m of MODES) if (!FLAGS[m]) throw new RangeError(`--modes: expected some of ${Object.keys(FLAGS).join(', ')}, got ${m}`);
if (!(SECONDS >= 20)) throw new RangeError(`--seconds: expected at least 20, got ${SECONDS}`);
if (!(RPS > 0 && RPS <= 1000)) throw new RangeError(`--rps: expected 1 to 1000 requests a second, got ${option('rps')}`);
if (!(ROUNDS >= 1)) throw new RangeError(`--rounds: expected at least 1, got ${ROUNDS}`);
if (process.getuid() !== 0) throw new Error('the agent needs root (eBPF): run with sudo');
for (const bin of BINS) if (!fs.existsSync(bin)) throw new Error(`no ${bin}: run cargo build --release first`);

// The agent's programs are the ones loaded after it starts (by name; bpftool's pids are not always there).
const PROGRAMS = ['sample_thread_ctx', 'off_cpu_switch', 'alloc_sample'];
const programs = () => bpfPrograms(PROGRAMS);

async function measure(mode, bin, servicePid, endpoint, tmp) {
  const out = endpoint ? ['--endpoint', endpoint, '--protocol', 'grpc'] : ['--pprof-dir', tmp];
  const args = ['agent', '--hz', String(HZ), '--interval', '10s', '--duration', `${SECONDS + 120}s`, '--pid', String(servicePid), ...FLAGS[mode], ...out];
  const before = new Set(programs().map((p) => p.id));
  const agent = track(spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] }));
  let stderr = '';
  agent.stderr.on('data', (d) => (stderr += d));
  await waitFor(agent, ': window ');
  const mine = () => programs().filter((p) => !before.has(p.id));
  const bpf0 = mine();
  const windows0 = stderr.split('\n').filter((l) => l.includes(': window ')).length;
  const t0 = process.hrtime.bigint();
  const cpu0 = cpuSeconds(agent.pid);
  // The highest share of a core over 1-second steps.
  let max = 0;
  let last = cpu0;
  for (let s = 0; s < SECONDS - 15; s++) {
    await sleep(1000);
    const now = cpuSeconds(agent.pid);
    max = Math.max(max, now - last);
    last = now;
  }
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = last - cpu0;
  const bpf1 = mine();
  const rss = peakRssMiB(agent.pid);
  await new Promise((resolve) => {
    agent.on('exit', resolve);
    agent.kill('SIGTERM');
  });
  const windows = stderr.split('\n').filter((l) => l.includes(': window ')).slice(windows0);
  const sum = (re) => windows.reduce((a, l) => a + Number((l.match(re) || [])[1] || 0), 0);
  const windowSecs = sum(/window ([\d.]+)s/);
  const perSec = (n) => (windowSecs ? n / windowSecs : NaN);
  const bpf = {};
  for (const p of bpf1) {
    const was = bpf0.find((q) => q.id === p.id);
    const ns = (p.run_time_ns || 0) - (was?.run_time_ns || 0);
    const runs = (p.run_cnt || 0) - (was?.run_cnt || 0);
    bpf[p.name] = { nsPerRun: runs ? ns / runs : NaN, corePct: (100 * ns) / 1e9 / wall };
  }
  return {
    bin,
    cpuPct: (100 * cpu) / wall,
    maxPct: 100 * max,
    rss,
    cpuSamples: perSec(sum(/ (\d+) CPU samples/)),
    withSpan: sum(/\((\d+) with a span\)/) / Math.max(1, sum(/ (\d+) CPU samples/)),
    offCpu: perSec(sum(/ (\d+) off-CPU intervals/)),
    allocs: perSec(sum(/ (\d+) allocation samples/)),
    dropped: sum(/(\d+) ring buffer full/),
    bpf,
    load: os.loadavg()[0],
  };
}

(async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-features-'));
  const { endpoint, tracesEndpoint } = (await startCollector()) ?? {};
  const service = track(spawn(process.execPath, [path.join(root, 'demo/service.js')], {
    // Its spans go to the Collector too (or, without one, to a span log nobody reads): a service
    // with no span processor gets no tracer, and its samples no spans.
    env: {
      ...process.env,
      PORT: '0',
      OTEL_SERVICE_NAME: 'bench-features',
      OTEL_THREAD_CTX_ALLOCATIONS: '1',
      ...(tracesEndpoint ? { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: tracesEndpoint } : { SPAN_LOG: '/dev/null' }),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  }));
  const { pid, port } = JSON.parse((await waitFor(service, '}')).trim().split('\n').pop());
  process.stderr.write(`demo service ${pid} on port ${port}, ${endpoint ? `exporting to the Collector at ${endpoint}` : 'pprof files'}; ${RPS} requests/s\n`);
  const load = startLoad(port, RPS);
  await sleep(10000); // the service's code compiled and optimised before the first agent
  const restoreBpfStats = enableBpfStats();
  const serviceCpu0 = cpuSeconds(pid);
  const t0 = Date.now();
  let rows;
  try {
    rows = await alternate({
      rounds: ROUNDS,
      modes: BINS.flatMap((bin) => MODES.map((m) => `${m} ${bin}`)),
      measure: (mode) => measure(mode.split(' ')[0], mode.slice(mode.indexOf(' ') + 1), pid, endpoint, tmp),
      onSample: (r) => process.stderr.write(`round ${r.round}: ${r.mode}: ${r.cpuPct.toFixed(2)} % of a core (max ${r.maxPct.toFixed(1)} %)\n`),
    });
  } finally {
    restoreBpfStats();
  }
  const serviceCorePct = (100 * (cpuSeconds(pid) - serviceCpu0)) / ((Date.now() - t0) / 1000);
  const { sent, answered, failed } = load.counts();
  load.stop();
  service.kill('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });

  const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '-');
  const med = (xs) => (xs.some(Number.isFinite) ? spread(xs.filter(Number.isFinite)).median : NaN);
  console.log(`thread-ctx agent on the demo service at ${RPS} requests/s (${answered} of ${sent} answered, ${failed} failed; the service used ${f(serviceCorePct)} % of a core), --hz ${HZ}, ${SECONDS} s per row, ${ROUNDS} rounds, ${os.cpus().length} CPUs, load ${f(Math.min(...rows.map((r) => r.load)))}–${f(Math.max(...rows.map((r) => r.load)))}, export: ${endpoint ? 'OTLP gRPC to the test Collector' : 'pprof files'}`);
  console.log('| binary | mode | agent CPU (% of a core), median [min, max] | highest 1-s share (%), max | peak RSS (MiB), median | CPU samples/s (with a span) | off-CPU intervals/s | allocation samples/s | dropped | BPF ns/run: CPU, off-CPU, alloc | BPF (% of a core): CPU, off-CPU, alloc |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const bin of BINS) {
    for (const mode of MODES) {
      const mine = rows.filter((r) => r.mode === `${mode} ${bin}`);
      const pct = spread(mine.map((r) => r.cpuPct));
      const bpf = (k, name) => f(med(mine.map((r) => r.bpf[name]?.[k] ?? NaN)), k === 'nsPerRun' ? 0 : 3);
      console.log(
        `| ${path.relative(root, bin)} | ${mode} | ${f(pct.median, 2)} [${f(pct.min, 2)}, ${f(pct.max, 2)}] | ${f(Math.max(...mine.map((r) => r.maxPct)))} | ${f(med(mine.map((r) => r.rss)))} | ` +
          `${f(med(mine.map((r) => r.cpuSamples)))} (${f(100 * med(mine.map((r) => r.withSpan)), 0)} %) | ${f(med(mine.map((r) => r.offCpu)))} | ${f(med(mine.map((r) => r.allocs)))} | ${mine.reduce((a, r) => a + r.dropped, 0)} | ` +
          `${PROGRAMS.map((p) => bpf('nsPerRun', p)).join(', ')} | ${PROGRAMS.map((p) => bpf('corePct', p)).join(', ')} |`,
      );
    }
  }
  // Per event kind, the agent's time: paired with the CPU mode of the same round and binary.
  if (MODES.includes('cpu')) {
    console.log('\n| binary | event | agent µs per event, median [min, max] over rounds | BPF ns per run, median | BPF ns per event (all runs ÷ events), median |');
    console.log('|---|---|---|---|---|');
    for (const bin of BINS) {
      const per = (mode, events, program) => {
        const xs = [];
        for (let round = 1; round <= ROUNDS; round++) {
          const base = rows.find((r) => r.round === round && r.mode === `cpu ${bin}`);
          const r = rows.find((x) => x.round === round && x.mode === `${mode} ${bin}`);
          if (!base || !r || !(events(r) > 0)) continue;
          xs.push(mode === 'cpu' ? (r.cpuPct * 1e4) / events(r) : ((r.cpuPct - base.cpuPct) * 1e4) / events(r));
        }
        const s = spread(xs);
        const mine = rows.filter((r) => r.mode === `${mode} ${bin}`);
        const ns = med(mine.map((r) => r.bpf[program]?.nsPerRun ?? NaN));
        // The program's whole run time (other processes' ticks and switches too) over the events it sent.
        const perEvent = med(mine.map((r) => ((r.bpf[program]?.corePct ?? NaN) * 1e7) / events(r)));
        return xs.length ? `${f(s.median)} [${f(s.min)}, ${f(s.max)}] | ${f(ns, 0)} | ${f(perEvent, 0)}` : '- | - | -';
      };
      console.log(`| ${path.relative(root, bin)} | a CPU sample | ${per('cpu', (r) => r.cpuSamples, 'sample_thread_ctx')} |`);
      if (MODES.includes('off-cpu')) console.log(`| ${path.relative(root, bin)} | an off-CPU interval | ${per('off-cpu', (r) => r.offCpu, 'off_cpu_switch')} |`);
      if (MODES.includes('alloc')) console.log(`| ${path.relative(root, bin)} | an allocation sample | ${per('alloc', (r) => r.allocs, 'alloc_sample')} |`);
    }
  }
})().then(
  // Exiting stops what it started (the Collector's pipes would keep it waiting).
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
