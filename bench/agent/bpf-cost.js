'use strict';
// The BPF program's own cost per CPU sample (`thread-ctx record --bpf-stats`), builds compared
// side by side: each round records a busy Node service (bench/agent/service.js) for --seconds
// with every binary of --bins, in alternated order (bench/lib/rounds.js): plain node with user
// stacks (the program walks the stack and reads each JS frame's slots: `v8 walk`), the same
// service on a copy of node without v8dbg_* symbols under --perf-basic-prof-only-functions
// (`bpf_get_stack`, the fallback path), and plain node without user stacks; the table gives each
// mode's median and range over the rounds. With --off-cpu, the off-CPU program's cost per
// interval of a service whose main thread blocks outside JS (Atomics.wait, a synchronous fs read,
// a synchronous child process: thread-ctx-v8's blocked-thread fixture), each binary recording it
// with --off-cpu, instead.
//   node bench/agent/bpf-cost.js --bins PATH[,PATH] [--rounds 5] [--seconds 15] [--hz 99] [--off-cpu]
// "per sample" is the program's own clock around its runs on the target's ticks (what the target's
// samples cost); "<= per sample" is the kernel's run time of every run divided by the target's
// samples, an upper bound that also holds the runs on other processes' ticks; "per run" is the
// kernel's BPF stats (run time ÷ runs, every tick of every process). A last table gives, per
// binary, the walk's cost over bpf_get_stack's round by round. Needs a quiet machine: everything a
// cold cache costs shows in these microseconds.
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { alternate } = require('../lib/rounds');
const { spread } = require('../lib/stats');
const { nodeWithoutV8dbg } = require('../lib/node-without-v8dbg');

const root = path.resolve(__dirname, '../..');
const { option } = require('../lib/args');
const BINS = option('bins', path.join(root, 'target/release/thread-ctx')).split(',').map((b) => path.resolve(b));
const ROUNDS = Number(option('rounds', '5'));
const SECONDS = Number(option('seconds', '15'));
const HZ = option('hz', '99');
const OFF_CPU = process.argv.includes('--off-cpu');
if (process.getuid() !== 0) throw new Error('eBPF needs root: run with sudo');

(async () => {
  if (OFF_CPU) return offCpu();
  const start = async (node, flags) => {
    const c = spawn(node, [...flags, path.join(__dirname, 'service.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise((r) => c.stdout.once('data', r));
    return c;
  };
  const services = { 'v8 walk': await start(process.execPath, []) };
  services.bpf_get_stack = await start(nodeWithoutV8dbg(), ['--perf-basic-prof-only-functions', '--logfile=/dev/null']);
  services['no-stacks'] = services['v8 walk'];
  const modes = BINS.flatMap((bin) => [`${bin}|v8 walk`, `${bin}|bpf_get_stack`, `${bin}|no-stacks`]);
  const loads = [];
  try {
    const samples = await alternate({
      rounds: ROUNDS,
      modes,
      measure: async (mode) => {
        const [bin, stacks] = mode.split('|');
        const args = ['record', String(services[stacks].pid), '--hz', HZ, '--duration', `${SECONDS}s`, '--bpf-stats', ...(stacks === 'no-stacks' ? ['--no-user-stacks'] : [])];
        const r = spawnSync(bin, args, { encoding: 'utf8' });
        const perRun = Number((r.stderr.match(/ (\d+) ns per run/) || [])[1]);
        const bound = Number((r.stderr.match(/<= (\d+) ns per sample/) || [])[1]);
        const perSample = Number((r.stderr.match(/ (\d+) ns per sample of the target \(its own clock\)/) || [])[1]);
        if (!(perSample > 0)) throw new Error(`${bin} printed no per-sample time: ${r.stderr.slice(-400)}`);
        loads.push(os.loadavg()[0]);
        return { perRun, perSample, bound };
      },
      onSample: (s) => process.stderr.write(`round ${s.round}: ${path.relative(root, s.mode.split('|')[0])} ${s.mode.split('|')[1]}: ${s.perSample} ns per sample\n`),
    });
    console.log(`BPF run time per CPU sample, ${ROUNDS} rounds of ${SECONDS} s at ${HZ} Hz, ${os.cpus().length} CPUs, load ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}`);
    console.log('| binary | user stacks | ns per sample of the target, median [min, max] | upper bound (all runs ÷ the target\'s samples), median | ns per run, median |');
    console.log('|---|---|---|---|---|');
    for (const mode of modes) {
      const mine = samples.filter((s) => s.mode === mode);
      const per = spread(mine.map((s) => s.perSample));
      const run = spread(mine.map((s) => s.perRun));
      const bound = spread(mine.map((s) => s.bound));
      const [bin, stacks] = mode.split('|');
      console.log(`| ${path.relative(root, bin)} | ${stacks} | ${per.median.toFixed(0)} [${per.min}, ${per.max}] | ${bound.median.toFixed(0)} | ${run.median.toFixed(0)} |`);
    }
    // The walk against bpf_get_stack, round by round (each pair measured minutes apart at most).
    console.log('\n| binary | v8 walk ÷ bpf_get_stack, per sample (own clock), median [min, max] | per run (kernel BPF stats), median [min, max] |');
    console.log('|---|---|---|');
    for (const bin of BINS) {
      const ratios = (k) => {
        const xs = [];
        for (let round = 1; round <= ROUNDS; round++) {
          const walk = samples.find((s) => s.round === round && s.mode === `${bin}|v8 walk`);
          const stack = samples.find((s) => s.round === round && s.mode === `${bin}|bpf_get_stack`);
          if (walk && stack && stack[k] > 0) xs.push(walk[k] / stack[k]);
        }
        const r = spread(xs);
        return `${r.median.toFixed(2)} [${r.min.toFixed(2)}, ${r.max.toFixed(2)}]`;
      };
      console.log(`| ${path.relative(root, bin)} | ${ratios('perSample')} | ${ratios('perRun')} |`);
    }
  } finally {
    for (const c of new Set(Object.values(services))) {
      c.kill('SIGKILL');
      fs.rmSync(`/tmp/perf-${c.pid}.map`, { force: true });
    }
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});

// The off-CPU program per interval of a blocking service ("its own clock": the program's time on
// the target's switches, out and in, over the intervals it sent), binaries alternated.
async function offCpu() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bpf-cost-'));
  const fixture = path.join(root, 'thread-ctx/cli/tests/fixtures/v8_blocked.js');
  const service = spawn(process.execPath, [fixture, root, 'Atomics,Fs,Exec', '1000', '', dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((r) => service.stdout.once('data', r));
  service.stdout.resume(); // its phase lines: never a full pipe
  const loads = [];
  try {
    const samples = await alternate({
      rounds: ROUNDS,
      modes: BINS,
      measure: async (bin) => {
        const r = spawnSync(bin, ['record', String(service.pid), '--duration', `${SECONDS}s`, '--off-cpu', '--bpf-stats'], { encoding: 'utf8' });
        const perInterval = Number((r.stderr.match(/ (\d+) ns per off-CPU interval of the target/) || [])[1]);
        if (!(perInterval > 0)) throw new Error(`${bin} printed no per-interval time: ${r.stderr.slice(-400)}`);
        loads.push(os.loadavg()[0]);
        return { perInterval };
      },
      onSample: (s) => process.stderr.write(`round ${s.round}: ${path.relative(root, s.mode)}: ${s.perInterval} ns per off-CPU interval\n`),
    });
    console.log(`off-CPU program per interval of a blocking service, ${ROUNDS} rounds of ${SECONDS} s, ${os.cpus().length} CPUs, load ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}`);
    console.log('| binary | ns per off-CPU interval of the target (out and in), median [min, max] |');
    console.log('|---|---|');
    for (const bin of BINS) {
      const per = spread(samples.filter((s) => s.mode === bin).map((s) => s.perInterval));
      console.log(`| ${path.relative(root, bin)} | ${per.median.toFixed(0)} [${per.min}, ${per.max}] |`);
    }
  } finally {
    service.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
