'use strict';
// Instructions per request of the event-loop thread, per mode, under valgrind's callgrind: a
// count the machine's noise does not move (other processes, steal, caches), to rank what the
// manager adds where CPU-time ratios cannot resolve a few percent. Not time: a cache miss or a
// mispredicted branch costs more than an instruction, so confirm with bench:span.
//
//   node bench/span-workload/instructions.js [--node 20] [--modes stock,floor,lookup,full]
//     [--rounds 1] [--requests 4000] [--warmup 15000] [--top 25 --diff full:lookup] [--keep DIR]
//     [--workload span|per-span|per-await]   (per-span.js's loop, --requests spans; per-await.js's
//     loop of `await null` in a span, --requests awaits)
//
// Node runs with V8's --predictable (single-threaded: GC and compilation on the event-loop thread,
// scheduled deterministically) and a full GC just before the window: without them the same mode
// moved by ±5 % between processes here, as a major GC or an optimisation fell in or out of the
// window.
// The child marks its measured window by calling os.getPriority() (uv_os_getpriority), which
// callgrind is told to dump its counters before; the window's counts are dump 2 of thread 1.
// --diff A:B prints the functions whose self instructions per request differ most between two
// modes (V8's builtins and runtime functions by their C++ names, JIT-compiled JavaScript by V8's
// perf map: '*name file:line' optimized, '+' Maglev, '^' Sparkplug, '~' interpreted).

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');
const { execFile, execFileSync } = require('node:child_process');
const { modeByName } = require('./modes');
const { resolveNode, nodeVersion } = require('../lib/node-binary');
const { alternate } = require('../lib/rounds');
const { median } = require('../lib/stats');
const { fixed, signed, utcMinute } = require('../lib/format');
const { describeMachine, codeRevision } = require('../lib/machine');
const { packagesOrThrow, copiesDirectory, commandLine, measuredRevision } = require('../lib/package-copy');
const { requireValgrind, callgrindOptions, windowDump } = require('../lib/callgrind');

// The span workload (per request), or per-span.js's loop (per span: no I/O, so no ordering
// nondeterminism; the finer tool for the per-span parts).
const WORKLOADS = {
  span: { script: path.join(__dirname, 'child.js'), args: (c, mode, dir) => ['--mode', mode, '--package', dir, '--requests', String(c.requests), '--warmup', String(c.warmup), '--gc-before-window'], unit: 'request' },
  'per-span': { script: path.join(__dirname, 'per-span.js'), args: (c, mode, dir) => ['--child', mode, '--package', dir, '--spans', String(c.requests)], unit: 'span' },
  'per-await': { script: path.join(__dirname, 'per-await.js'), args: (c, mode, dir) => ['--child', mode, '--package', dir, '--awaits', String(c.requests)], unit: 'await' },
};

function parse() {
  const { values } = parseArgs({
    options: {
      node: { type: 'string' },
      modes: { type: 'string', default: 'stock,floor,lookup,full' },
      rounds: { type: 'string', default: '1' },
      // A window of thousands of requests: short ones (800 or 1,500) left most scavenges out or
      // in by chance, and a change that allocated less per span could even count more (the same
      // code measured 189 k after 3,000 warm-up requests and 252 k after 10,000 on Node 24).
      requests: { type: 'string', default: '4000' },
      // After 5,000 warm-up requests V8 was still optimizing in the window (with --predictable it
      // compiles on this thread): ~30 k instructions per request of compilation, 5.9 k more with
      // the manager's code than without; after 15,000 it is ~12 k and the same in every mode.
      warmup: { type: 'string', default: '15000' },
      top: { type: 'string', default: '25' },
      diff: { type: 'string' },
      keep: { type: 'string' },
      workload: { type: 'string', default: 'span' },
    },
  });
  const modes = values.modes.split(',').filter(Boolean);
  for (const m of modes) modeByName(m);
  const int = (name) => {
    const v = Number(values[name]);
    if (!Number.isInteger(v) || v <= 0) throw new TypeError(`--${name}: expected a positive integer, got ${JSON.stringify(values[name])}`);
    return v;
  };
  let diff = null;
  if (values.diff !== undefined) {
    // Mode names may hold a colon themselves (proto:NAME, rev:REV): the split that names two modes.
    const text = values.diff;
    diff = [...text].map((c, i) => (c === ':' ? [text.slice(0, i), text.slice(i + 1)] : null))
      .find((pair) => pair !== null && pair.every((m) => modes.includes(m))) ?? null;
    if (diff === null) {
      throw new TypeError(`--diff: expected A:B, two of the measured modes, got ${JSON.stringify(values.diff)}`);
    }
  }
  const workload = WORKLOADS[values.workload];
  if (workload === undefined) throw new TypeError(`--workload: expected span, per-span or per-await, got ${JSON.stringify(values.workload)}`);
  return {
    workload, nodeBin: resolveNode(values.node), modes, rounds: int('rounds'), requests: int('requests'),
    warmup: int('warmup'), top: int('top'), diff, keep: values.keep,
  };
}

async function callgrind(config, mode, packageDir, outDir) {
  const { prefix, args: callgrindArgs } = callgrindOptions(outDir, mode);
  // With --diff, V8 writes /tmp/perf-PID.map (address, size, name of each piece of JIT code) so
  // that JavaScript functions are named in the diff instead of shown as bare addresses.
  const nodeFlags = ['--predictable', '--expose-gc', ...(config.diff !== null ? ['--perf-basic-prof', '--logfile=/dev/null'] : [])];
  const args = [...callgrindArgs, config.nodeBin, ...nodeFlags, config.workload.script,
    ...config.workload.args(config, mode, packageDir)];
  const stderr = await new Promise((resolve, reject) => {
    execFile('valgrind', args, { encoding: 'utf8', maxBuffer: 1 << 26 }, (err, stdout, stderrText) => {
      if (err) return reject(new Error(`valgrind ${mode}: ${stderrText.trim().split('\n').slice(-5).join(' | ') || err.message}`));
      resolve(stderrText);
    });
  });
  const pid = /==(\d+)==/.exec(stderr)?.[1];
  if (pid === undefined) throw new Error(`valgrind ${mode}: expected its process id on stderr, got none`);
  const { file, total } = windowDump(prefix, pid, `valgrind ${mode}`);
  const majorGc = majorGcInstructions(file) / config.requests;
  const perfMap = `/tmp/perf-${pid}.map`;
  const jitNames = fs.existsSync(perfMap) ? readPerfMap(perfMap) : null;
  if (jitNames !== null) fs.rmSync(perfMap, { force: true });
  return { instructionsPerRequest: total / config.requests - majorGc, majorGcPerRequest: majorGc, file, jitNames };
}

// V8's perf map: one line per piece of JIT code, "START SIZE NAME" (hex), sorted by start.
function readPerfMap(file) {
  const entries = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) (.+)$/.exec(line);
    if (m !== null) entries.push({ start: parseInt(m[1], 16), end: parseInt(m[1], 16) + parseInt(m[2], 16), name: m[3] });
  }
  return entries.sort((x, y) => x.start - y.start);
}

// The name of the JIT code at `address` (binary search), or null.
function jitName(entries, address) {
  let lo = 0;
  let hi = entries.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (entries[mid].start <= address) lo = mid + 1;
    else hi = mid - 1;
  }
  const e = entries[hi];
  return e !== undefined && address < e.end ? e.name : null;
}

// Self instructions per function of one dump (callgrind_annotate's flat profile); JIT code named
// from `jitNames` (a perf map) when given. The frames that enclose the whole window (main, the
// event loop) are listed with the window's total: they are left out.
function selfByFunction(file, jitNames = null) {
  const out = execFileSync('callgrind_annotate', ['--threshold=100', file], { encoding: 'utf8', maxBuffer: 1 << 26 });
  const map = new Map();
  for (const line of out.split('\n')) {
    const m = /^\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(.+?)\s*$/.exec(line);
    if (m === null || m[3].includes('PROGRAM TOTALS') || m[2] === '100.0') continue;
    let fn = m[3].replace(/^\?\?\?:/, '').replace(/ \[[^\]]*\]$/, '');
    const address = /^0x([0-9a-f]+)('\d+)?$/.exec(fn);
    const name = address !== null && jitNames !== null ? jitName(jitNames, parseInt(address[1], 16)) : null;
    if (name !== null) fn = name;
    map.set(fn, (map.get(fn) ?? 0) + Number(m[1].replace(/,/g, '')));
  }
  return map;
}

// A major GC (mark-compact: marking, sweeping, the marking write barrier) lands in a window of a
// few thousand requests or not, depending on when the heap reached its limit: its instructions are
// counted apart, so that the modes compare on the mutator and the scavenges.
const MAJOR_GC = /MarkCompact|MarkingVisitor|MarkingBarrier|MarkingWorklist|WriteBarrier::Marking|Sweeper|IncrementalMarking|ConcurrentMarking|MarkingHelper|MainMarkingVisitor/;

function majorGcInstructions(file) {
  let total = 0;
  for (const [fn, n] of selfByFunction(file)) if (MAJOR_GC.test(fn)) total += n;
  return total;
}

function main() {
  const config = parse();
  requireValgrind();
  const copies = copiesDirectory();
  const outDir = config.keep ?? fs.mkdtempSync(path.join(os.tmpdir(), 'otel-thread-ctx-callgrind-'));
  fs.mkdirSync(outDir, { recursive: true });
  const dirs = packagesOrThrow(config.modes, (m) => modeByName(m), copies.dir);
  const startedAt = new Date();
  const revision = measuredRevision(codeRevision); // before the run: not a commit made during it
  return alternate({
    rounds: config.rounds,
    modes: config.modes,
    measure: (mode) => callgrind(config, mode, dirs.get(mode), outDir),
    onSample: (s) => process.stderr.write(`  round ${s.round} ${s.mode}: ${fixed(s.instructionsPerRequest, 0)} instructions/${config.workload.unit} ` +
      `+ ${fixed(s.majorGcPerRequest, 0)} in a major GC\n`),
  }).then((samples) => {
    const per = new Map(config.modes.map((m) => [m, median(samples.filter((s) => s.mode === m).map((s) => s.instructionsPerRequest))]));
    const machine = describeMachine();
    const lines = [`### Span workload, instructions — Node ${nodeVersion(config.nodeBin)}, ${utcMinute(startedAt)}`, ''];
    lines.push(`valgrind callgrind, node --predictable, full GC before the window, event-loop thread only, ${config.requests} ${config.workload.unit}s` +
      `${config.workload.unit === 'request' ? ` after ${config.warmup} warm-up` : ' (after as many)'}, ` +
      `median of ${config.rounds} process(es) per mode, alternated; ${machine.cpuModel}, ${machine.kernel}.`);
    lines.push('');
    const unit = config.workload.unit;
    lines.push(`| mode | instructions/${unit}, without major GC | spread of runs | over stock | over floor | major GC in the window, per ${unit} |`);
    lines.push('|---|---:|---:|---:|---:|---:|');
    for (const m of config.modes) {
      const runs = samples.filter((s) => s.mode === m).map((s) => s.instructionsPerRequest);
      const over = (base) => (per.has(base) && m !== base ? signed(per.get(m) - per.get(base), 0) : '–');
      const gc = median(samples.filter((s) => s.mode === m).map((s) => s.majorGcPerRequest));
      lines.push(`| ${m} | ${fixed(per.get(m), 0)} | ±${fixed((Math.max(...runs) - Math.min(...runs)) / 2, 0)} | ${over('stock')} | ${over('floor')} | ${fixed(gc, 0)} |`);
    }
    lines.push('');
    lines.push(`Command: \`${commandLine(`node bench/span-workload/instructions.js ${process.argv.slice(2).join(' ')}`)}\` at ${revision}.`);
    if (config.diff !== null) {
      const [a, b] = config.diff;
      const first = (mode) => samples.find((s) => s.mode === mode);
      const fa = selfByFunction(first(a).file, first(a).jitNames);
      const fb = selfByFunction(first(b).file, first(b).jitNames);
      const rows = [...new Set([...fa.keys(), ...fb.keys()])]
        .map((fn) => ({ fn, d: ((fa.get(fn) ?? 0) - (fb.get(fn) ?? 0)) / config.requests }))
        .sort((x, y) => Math.abs(y.d) - Math.abs(x.d)).slice(0, config.top);
      lines.push('', `Self instructions per ${config.workload.unit}, ${a} − ${b} (first process of each), largest differences:`, '');
      lines.push(`| function | Δ instructions/${config.workload.unit} |`, '|---|---:|');
      for (const r of rows) lines.push(`| \`${r.fn.replace(/\|/g, '\\|').slice(0, 120)}\` | ${signed(r.d, 0)} |`);
    }
    process.stdout.write(lines.join('\n') + '\n');
    copies.remove();
    if (config.keep === undefined) fs.rmSync(outDir, { recursive: true, force: true });
  });
}

Promise.resolve().then(main).catch((err) => {
  process.stderr.write(`instructions: ${err.message}\n`);
  process.exit(1);
});
