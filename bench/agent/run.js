'use strict';
// Cost of `thread-ctx agent` (as root): its CPU (fraction of one core, from /proc/PID/stat) and
// peak RSS (VmHWM) while it profiles 1, 5 and 20 busy Node services (bench/agent/service.js) at
// 19, 49 and 99 Hz, with the samples it takes and exports per second, the BPF program's run time
// (kernel BPF stats) and the peak RSS each added service costs. Exports OTLP to the repository's
// test Collector when it is built (target/otelcol), else writes pprof files to a temporary
// directory. With --alloc the services run V8's sampling heap profiler (OTEL_THREAD_CTX_ALLOCATIONS,
// the package's default 512 KiB interval) and allocate as they work, and the agent takes their
// allocation samples too (`agent --alloc`): the table adds allocation samples per second and the
// allocation program's BPF run time per sample.
//   node bench/agent/run.js [--seconds 120] [--services 1,5,20] [--hz 19,49,99] [--alloc]
//                           [--bins PATH,PATH --rounds N] [--naming heap,perfmap]
// One configuration at a time; on a shared machine, other work competes with the services (not
// with the measurement of the agent's own CPU time). With --bins, every configuration runs each
// agent binary once per round, alternated (bench/lib/rounds.js), and a last table gives each
// binary's medians with their range over the rounds: two builds compared side by side.
// --naming heap,perfmap compares how the services' JS frames are named, alternated the same way:
// `heap`, plain node (the sampler walks each JS frame in BPF, the agent names it from the
// service's V8 heap); `perfmap`, --perf-basic-prof-only-functions on a copy of the same node whose
// v8dbg_* symbols were renamed away (the sampler takes the stack with bpf_get_stack, the agent
// names JS frames from the perf map): the two paths on the same Node, side by side.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { root, track, cpuSeconds, threadCpuSeconds, peakRssMiB, waitFor, startCollector, bpfPrograms, enableBpfStats, sleep } = require('../lib/agent-bench');
const { alternate } = require('../lib/rounds');
const { spread } = require('../lib/stats');
const { nodeWithoutV8dbg } = require('../lib/node-without-v8dbg');


const { option } = require('../lib/args');
const SECONDS = Number(option('seconds', '120'));
const SERVICES = option('services', '1,5,20').split(',').map(Number);
const RATES = option('hz', '19,49,99').split(',').map(Number);
const BINS = option('bins', path.join(root, 'target/release/thread-ctx')).split(',');
const ROUNDS = Number(option('rounds', '1'));
const ALLOC = process.argv.includes('--alloc');
const NAMINGS = option('naming', 'heap').split(',');
for (const n of NAMINGS) if (!['heap', 'perfmap'].includes(n)) throw new RangeError(`--naming: expected heap and/or perfmap, got ${n}`);
if (!(SECONDS >= 10)) throw new RangeError(`--seconds: expected at least 10, got ${SECONDS}`);
if (process.getuid() !== 0) throw new Error('the agent needs root (eBPF): run with sudo');
for (const bin of BINS) if (!fs.existsSync(bin)) throw new Error(`no ${bin}: run cargo build --release first`);
if (!(ROUNDS >= 1)) throw new RangeError(`--rounds: expected at least 1, got ${ROUNDS}`);

// The CPU programs (or the allocation programs) loaded now (bpftool), by id: the agent's is the one
// that appears after it starts (bpftool's owner pids are not always available).
const samplerProgs = (name = 'sample_thread_ctx') => bpfPrograms([name]);
// BPF run time of program `id`, from kernel BPF stats.
function bpfStats(id, name) {
  const p = samplerProgs(name).find((x) => x.id === id);
  return p ? { runTimeNs: p.run_time_ns || 0, runs: p.run_cnt || 0 } : null;
}

const perfMapNode = NAMINGS.includes('perfmap') ? nodeWithoutV8dbg() : null;

async function measure(services, hz, endpoint, bin, naming) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-agent-'));
  const children = [];
  const [node, flags] = naming === 'perfmap' ? [perfMapNode, ['--perf-basic-prof-only-functions', '--logfile=/dev/null']] : [process.execPath, []];
  for (let i = 0; i < services; i++) {
    const c = track(spawn(node, [...flags, path.join(__dirname, 'service.js')], {
      env: { ...process.env, OTEL_SERVICE_NAME: `bench-service-${i}`, ...(ALLOC ? { OTEL_THREAD_CTX_ALLOCATIONS: '1' } : {}) },
      stdio: ['ignore', 'pipe', 'inherit'],
    }));
    children.push(c);
    await waitFor(c, 'ready');
  }
  const pids = children.map((c) => c.pid);
  const out = endpoint ? ['--endpoint', endpoint, '--protocol', 'grpc'] : ['--pprof-dir', tmp];
  // The agent is stopped (SIGTERM) after the measured span; its own --duration is only a backstop,
  // long enough that a first window slowed by a busy machine does not end it before its last reading.
  const args = ['agent', '--hz', String(hz), '--interval', '10s', '--duration', `${SECONDS + 120}s`, ...pids.flatMap((p) => ['--pid', String(p)]), ...out];
  if (ALLOC) args.push('--alloc');
  const before = new Set(samplerProgs().map((p) => p.id));
  const allocBefore = new Set(samplerProgs('alloc_sample').map((p) => p.id));
  const agent = track(spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] }));
  let stderr = '';
  agent.stderr.on('data', (d) => (stderr += d));
  await waitFor(agent, ': window ');
  const progId = Math.max(-1, ...samplerProgs().map((p) => p.id).filter((id) => !before.has(id)));
  const allocId = Math.max(-1, ...samplerProgs('alloc_sample').map((p) => p.id).filter((id) => !allocBefore.has(id)));
  // From the end of the first window (start-up and discovery excluded) to the end.
  const t0 = process.hrtime.bigint();
  const cpu0 = cpuSeconds(agent.pid);
  const threads0 = threadCpuSeconds(agent.pid);
  const bpf0 = bpfStats(progId);
  const alloc0 = bpfStats(allocId, 'alloc_sample');
  const windows0 = stderr.split('\n').filter((l) => l.includes(': window ')).length;
  await sleep((SECONDS - 15) * 1000);
  const cpu1 = cpuSeconds(agent.pid);
  const threads1 = threadCpuSeconds(agent.pid);
  const bpf1 = bpfStats(progId);
  const alloc1 = bpfStats(allocId, 'alloc_sample');
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const rss = peakRssMiB(agent.pid);
  await new Promise((resolve) => {
    agent.on('exit', resolve);
    agent.kill('SIGTERM');
  });
  for (const c of children) {
    c.kill('SIGKILL');
    fs.rmSync(`/tmp/perf-${c.pid}.map`, { force: true });
  }
  fs.rmSync(tmp, { recursive: true, force: true });
  const allWindows = stderr.split('\n').filter((l) => l.includes(': window '));
  const windows = allWindows.slice(windows0);
  const num = (l, re) => Number((l.match(re) || [])[1] || 0);
  // The V8 heap reads (system calls) and MiB read so far, running totals of the status line.
  const heapReads = (l) => (l ? [num(l, /V8 heap reads: (\d+) \(/), num(l, /V8 heap reads: \d+ \(([\d.]+) MiB\)/)] : [0, 0]);
  const [reads0, mib0] = heapReads(allWindows[windows0 - 1]);
  const [reads1, mib1] = heapReads(allWindows[allWindows.length - 1]);
  const samples = windows.reduce((a, l) => a + num(l, / (\d+) CPU samples/), 0);
  const span = windows.reduce((a, l) => a + num(l, /\((\d+) with a span\)/), 0);
  const windowSecs = windows.reduce((a, l) => a + num(l, /window ([\d.]+)s/), 0);
  const last = stderr.split('\n').filter((l) => l.includes('stopped;')).pop() || '';
  const exportedOtlp = num(last, /exported \d+ requests \((\d+) OTLP Sample messages/);
  const dropped = windows.reduce((a, l) => a + num(l, /(\d+) ring buffer full/), 0);
  const allocs = windows.reduce((a, l) => a + num(l, / (\d+) allocation samples/), 0);
  const allocRuns = alloc0 && alloc1 ? alloc1.runs - alloc0.runs : 0;
  const allocNs = alloc0 && alloc1 ? alloc1.runTimeNs - alloc0.runTimeNs : 0;
  const runs = bpf0 && bpf1 ? bpf1.runs - bpf0.runs : 0;
  const runNs = bpf0 && bpf1 ? bpf1.runTimeNs - bpf0.runTimeNs : 0;
  // JS frames of the CPU samples (once per sample), as each window's status line counts them.
  const namingLine = / JS frames in the CPU samples symbolized since the last line: \d+ named \((\d+) from V8 heaps, \d+ from perf maps\), (\d+) unnamed/;
  // Each stage's (thread's) share of the agent's CPU per sample, in µs.
  const perSample = samples ? (samples * wall) / windowSecs : 0;
  // The main thread carries the binary's name (its first 15 bytes): the sampling loop.
  const stage = (n) => (n === path.basename(bin).slice(0, 15) ? 'sampling loop' : n);
  const stages = Object.fromEntries(Object.keys(threads1).map((n) => [stage(n), perSample ? ((threads1[n] - (threads0[n] || 0)) * 1e6) / perSample : NaN]));
  // What the names kept across windows saved over the measured windows (running totals of the
  // status line, differenced; an older build prints none).
  const kept = (l) => {
    const m = (l || '').match(/names kept across windows: JS frames (\d+) named, (\d+) reused \((\d+) checked, (\d+) stale\) in (\d+) batches, native (\d+) named, (\d+) reused/);
    return m ? m.slice(1).map(Number) : null;
  };
  // Absent before the first naming: zeros then.
  const k1 = kept(allWindows[allWindows.length - 1]);
  const k0 = kept(allWindows[windows0 - 1]) || (k1 && k1.map(() => 0));
  const names = k0 && k1 ? Object.fromEntries(['jsNamed', 'jsReused', 'jsChecked', 'jsStale', 'batches', 'nativeNamed', 'nativeReused'].map((n, i) => [n, k1[i] - k0[i]])) : null;
  return {
    bin,
    naming,
    stages,
    names,
    heapNamed: windows.reduce((a, l) => a + num(l, namingLine), 0),
    heapMissed: windows.reduce((a, l) => a + Number((l.match(namingLine) || [])[2] || 0), 0),
    services,
    hz,
    cpuPct: (100 * (cpu1 - cpu0)) / wall,
    // Agent CPU per sample the kernel delivered in the measured span.
    usPerSample: samples ? ((cpu1 - cpu0) * 1e6) / ((samples * wall) / windowSecs) : NaN,
    // Reads of the services' V8 heaps per sample of the windows measured (heap naming only).
    readsPerSample: samples && reads1 > reads0 ? (reads1 - reads0) / samples : NaN,
    kibPerSample: samples && reads1 > reads0 ? ((mib1 - mib0) * 1024) / samples : NaN,
    load: os.loadavg()[0],
    rss,
    samplesPerSec: samples / windowSecs,
    spanPct: samples ? (100 * span) / samples : 0,
    otlpPerSec: endpoint ? exportedOtlp / SECONDS : NaN,
    dropped,
    nsPerRun: runs ? runNs / runs : NaN,
    nsPerSample: samples && runs ? runNs / ((samples * wall) / windowSecs) : NaN,
    allocsPerSec: allocs / windowSecs,
    allocNsPerRun: allocRuns ? allocNs / allocRuns : NaN,
  };
}

(async () => {
  const { collector, endpoint } = (await startCollector()) ?? {};
  const restoreBpfStats = enableBpfStats();
  const rows = [];
  try {
    for (const services of SERVICES) {
      for (const hz of RATES) {
        const samples = await alternate({
          rounds: ROUNDS,
          modes: BINS.flatMap((bin) => NAMINGS.map((naming) => `${naming} ${bin}`)),
          measure: (mode) => measure(services, hz, endpoint, mode.slice(mode.indexOf(' ') + 1), mode.slice(0, mode.indexOf(' '))),
          onSample: (r) => process.stderr.write(`done: ${services} services at ${hz} Hz, ${r.bin}, ${r.naming} naming, round ${r.round}: ${r.cpuPct.toFixed(2)} % of a core, ${r.usPerSample.toFixed(0)} µs per sample, BPF ${r.nsPerRun.toFixed(0)} ns per run; µs per sample by thread: ${Object.entries(r.stages).map(([n, us]) => `${n} ${us.toFixed(1)}`).join(', ')}${r.names ? `; names kept: ${JSON.stringify(r.names)}` : ''}\n`),
        });
        rows.push(...samples);
      }
    }
  } finally {
    restoreBpfStats();
    collector?.kill('SIGTERM');
  }
  const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '-');
  const allocation = ALLOC ? ', allocations on (agent --alloc, services at 512 KiB)' : '';
  console.log(`thread-ctx agent, ${SECONDS} s per row, 10 s windows, ${os.cpus().length} CPUs, export: ${endpoint ? 'OTLP gRPC to the test Collector' : 'pprof files'}${allocation}`);
  const allocHead = ALLOC ? ' allocation samples/s | alloc BPF ns/run |' : '';
  console.log(`| binary | JS naming | services | Hz | agent CPU (% of a core) | agent CPU per sample (µs) | peak RSS (MiB) | samples/s | with a span | OTLP samples exported/s | dropped | BPF ns/run | BPF ns/sample (<=) | JS frames in samples named from the heap (unnamed) | V8 heap reads per sample | KiB read per sample |${allocHead} load (1 min) |`);
  console.log(`|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|${ALLOC ? '---|---|' : ''}---|`);
  for (const r of rows) {
    const allocCols = ALLOC ? ` ${f(r.allocsPerSec)} | ${f(r.allocNsPerRun, 0)} |` : '';
    console.log(`| ${path.relative(root, r.bin)} | ${r.naming} | ${r.services} | ${r.hz} | ${f(r.cpuPct, 2)} | ${f(r.usPerSample, 0)} | ${f(r.rss)} | ${f(r.samplesPerSec)} | ${f(r.spanPct, 0)} % | ${f(r.otlpPerSec)} | ${r.dropped} | ${f(r.nsPerRun, 0)} | ${f(r.nsPerSample, 0)} | ${r.heapNamed} (${r.heapMissed}) | ${f(r.readsPerSample)} | ${f(r.kibPerSample)} |${allocCols} ${f(r.load, 1)} |`);
  }
  // Where each run's agent CPU went: µs per sample by thread (the sampling loop is the
  // binary's own name; `symbolize` names frames and finishes windows).
  const stageNames = [...new Set(rows.flatMap((r) => Object.keys(r.stages)))].sort();
  console.log(`\n| binary | JS naming | services | Hz | ${stageNames.map((n) => `${n} µs/sample`).join(' | ')} |`);
  console.log(`|---|---|---|---|${stageNames.map(() => '---|').join('')}`);
  for (const r of rows) console.log(`| ${path.relative(root, r.bin)} | ${r.naming} | ${r.services} | ${r.hz} | ${stageNames.map((n) => f(r.stages[n], 1)).join(' | ')} |`);
  if (BINS.length > 1 || NAMINGS.length > 1 || ROUNDS > 1) {
    console.log('\n| binary | JS naming | services | Hz | rounds | agent CPU per sample (µs), median [min, max] | agent CPU (% of a core), median [min, max] | BPF ns/run, median [min, max] | peak RSS (MiB), median | V8 heap reads per sample, median | KiB read per sample, median |');
    console.log('|---|---|---|---|---|---|---|---|---|---|---|');
    for (const services of SERVICES) {
      for (const hz of RATES) {
        for (const bin of BINS) {
          for (const naming of NAMINGS) {
            const mine = rows.filter((r) => r.bin === bin && r.naming === naming && r.services === services && r.hz === hz);
            const us = spread(mine.map((r) => r.usPerSample));
            const pct = spread(mine.map((r) => r.cpuPct));
            const ns = spread(mine.map((r) => r.nsPerRun));
            const rss = spread(mine.map((r) => r.rss));
            const reads = spread(mine.map((r) => r.readsPerSample));
            const kib = spread(mine.map((r) => r.kibPerSample));
            console.log(`| ${path.relative(root, bin)} | ${naming} | ${services} | ${hz} | ${mine.length} | ${f(us.median, 0)} [${f(us.min, 0)}, ${f(us.max, 0)}] | ${f(pct.median, 2)} [${f(pct.min, 2)}, ${f(pct.max, 2)}] | ${f(ns.median, 0)} [${f(ns.min, 0)}, ${f(ns.max, 0)}] | ${f(rss.median)} | ${f(reads.median)} | ${f(kib.median)} |`);
          }
        }
      }
    }
  }
  // What each tracked process adds to the agent's memory: the peak RSS slope between the fewest
  // and the most services at the same rate (the fixed part, sampler and exporter, cancels out).
  for (const hz of RATES) {
    const at = rows.filter((r) => r.hz === hz && r.bin === BINS[0] && r.naming === NAMINGS[0] && r.round === 1).sort((a, b) => a.services - b.services);
    const [lo, hi] = [at[0], at[at.length - 1]];
    if (at.length > 1 && hi.services > lo.services) {
      console.log(`peak RSS per added service at ${hz} Hz: ${f((hi.rss - lo.rss) / (hi.services - lo.services), 2)} MiB (${lo.services} → ${hi.services} services)`);
    }
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
