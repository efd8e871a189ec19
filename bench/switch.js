'use strict';
// Per-switch cost of ThreadContextManager over the stock AsyncLocalStorageContextManager and over
// the floor (the stock manager plus the manager's hook points with empty bodies: what the runtime
// charges for dispatching them at all), one process per variant, variants alternated round after
// round (the order rotating), on one or more Node versions:
//   - per `await null` inside an active span (thread CPU time, like everything here)
//   - per timer callback: setTimeout(cb, 0) scheduled and run in a span (see nsPerTimer)
//   - per with() call alternating between two spans (synchronous; what cheap mode costs)
// Schema 'nodejs' (no hooks) is a fifth variant where the runtime has AsyncContextFrame.
// Per round, each variant's figure minus the stock's (and the manager's minus the floor's) of the
// same round; the tables give the median over rounds with a 95 % bootstrap interval.
//
//   node bench/switch.js [--node 20,22,24,26] [--rounds 15] [--awaits 300000] [--timers 20000]
//     [--cpu 0|none] [--json FILE] [--node-arg ARG]...
//   scripts/node-matrix.sh bench [ARGS]     (each Node of the matrix, its flags included)
//   OTEL_THREAD_CTX_BENCH_REV=REV ...       (the package's JS layer of git revision REV)

process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
const fs = require('node:fs');
const { parseArgs } = require('node:util');
const { execFile, execFileSync } = require('node:child_process');
const { resolveNode, nodeVersion } = require('./lib/node-binary');
const { positiveInteger, cpuOrNone } = require('./lib/args');
const { alternate } = require('./lib/rounds');
const { median, pairedDifference } = require('./lib/stats');
const { fixed, interval, utcMinute } = require('./lib/format');
const { describeMachine, loadAverage, codeRevision } = require('./lib/machine');
const { commandLine, measuredRevision, PACKAGE_DIR } = require('./lib/package-copy');

// nodejs: schema 'nodejs' (no hooks), where the runtime has AsyncContextFrame.
const VARIANTS = ['stock', 'floor', 'thread', 'cheap', 'nodejs'];

// ---- the child: one variant, one process ----------------------------------------------------

// One variant per process: enabling and disabling hooks leaves state behind in Node's async_hooks
// (e.g. megamorphic feedback in its emit loop) that would slow down whatever is measured next.
async function child(name, { awaits, timers }) {
  const { trace, ROOT_CONTEXT } = require('@opentelemetry/api');
  const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
  const { buildContextManager } = require('./lib/managers');
  // CPU time of this thread (CLOCK_THREAD_CPUTIME_ID): on this shared VM wall time includes what
  // the hypervisor steals, and process.cpuUsage() adds V8's helper threads.
  const { __benchThreadCpuTimeNs: threadCpuTimeNs } = require('../otel-thread-ctx.linux-x64-gnu.node');

  const tracer = new BasicTracerProvider().getTracer('bench');
  const span = tracer.startSpan('bench');
  const spanContext = trace.setSpan(ROOT_CONTEXT, span);
  const otherContext = trace.setSpan(ROOT_CONTEXT, tracer.startSpan('other'));
  const kind = { stock: 'stock', floor: 'floor', thread: 'manager', cheap: 'manager', nodejs: 'manager' }[name];
  const managerOptions = { cheap: { asyncTracking: false }, nodejs: { schema: 'nodejs' } }[name] ?? {};
  const built = buildContextManager(kind, { managerOptions });
  const manager = built.manager.enable();

  async function awaitLoop(n) {
    for (let i = 0; i < n; i++) await null;
  }
  function nsPerAwait() {
    return manager.with(spanContext, async () => {
      const start = threadCpuTimeNs();
      await awaitLoop(awaits);
      return (threadCpuTimeNs() - start) / awaits;
    });
  }
  // Thread CPU time from scheduling the timers (init hooks) to the last callback (before/after
  // hooks); the idle wait for the 1 ms timeout costs no CPU.
  function nsPerTimer() {
    return manager.with(spanContext, () => new Promise((resolve) => {
      let left = timers;
      const tick = () => {
        if (--left === 0) resolve((threadCpuTimeNs() - start) / timers);
      };
      const start = threadCpuTimeNs();
      for (let i = 0; i < timers; i++) setTimeout(tick, 0);
    }));
  }
  // with() alternating between two spans, so that every call publishes and restores.
  const WITHS = 200000;
  function nsPerWith() {
    let sink = 0;
    const fn = () => { sink++; };
    const start = threadCpuTimeNs();
    for (let i = 0; i < WITHS; i++) manager.with(i & 1 ? spanContext : otherContext, fn);
    const ns = (threadCpuTimeNs() - start) / WITHS;
    if (sink !== WITHS) throw new Error('bench: with() did not run its function');
    return ns;
  }

  // Within a process: warm-up, then the median of several batches (timer batches are noisy).
  await nsPerAwait();
  await nsPerTimer();
  nsPerWith();
  const perAwait = [];
  const perTimer = [];
  const perWith = [];
  for (let batch = 0; batch < 3; batch++) perAwait.push(await nsPerAwait());
  for (let batch = 0; batch < 9; batch++) perTimer.push(await nsPerTimer());
  for (let batch = 0; batch < 3; batch++) perWith.push(nsPerWith());
  if (name === 'thread' || name === 'nodejs') {
    // The measured manager really publishes: the record (the frame's, for schema nodejs) shows the
    // span after an await inside with().
    const read = name === 'nodejs' ? built.pkg.getFrameSpanContext : built.pkg.getSpanContext;
    await manager.with(spanContext, async () => {
      await null;
      if (read()?.spanId !== span.spanContext().spanId) throw new Error(`bench: expected the span published (${manager.schemaFallback ?? ''})`);
    });
  }
  span.end();
  const mechanism = name === 'stock' ? 'AsyncLocalStorage' : manager.mechanism;
  return { perAwait: median(perAwait), perTimer: median(perTimer), perWith: median(perWith), mechanism };
}

// ---- the parent: alternation and report -------------------------------------------------------

function parse(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      node: { type: 'string' },
      rounds: { type: 'string', default: '15' },
      awaits: { type: 'string', default: '300000' },
      timers: { type: 'string', default: '20000' },
      cpu: { type: 'string', default: '0' },
      json: { type: 'string' },
      'node-arg': { type: 'string', multiple: true, default: [] },
      child: { type: 'string' },
    },
  });
  const config = {
    rounds: positiveInteger('rounds', values.rounds),
    awaits: positiveInteger('awaits', values.awaits),
    timers: positiveInteger('timers', values.timers),
    child: values.child,
  };
  if (config.child !== undefined) {
    if (!VARIANTS.includes(config.child)) throw new TypeError(`--child: expected one of ${VARIANTS.join(', ')}, got ${JSON.stringify(config.child)}`);
    return config;
  }
  const cpu = cpuOrNone('cpu', values.cpu);
  const nodes = (values.node ?? '').split(',').filter((n) => n !== '');
  // Without --node: this process's node and its flags (scripts/node-matrix.sh bench passes them).
  const nodeRuns = nodes.length === 0 ? [{ bin: process.execPath, args: [...process.execArgv, ...values['node-arg']] }]
    : nodes.map((n) => ({ bin: resolveNode(n), args: values['node-arg'] }));
  return { ...config, cpu, nodeRuns, json: values.json };
}

function runChild(nodeRun, config, variant) {
  const args = [...nodeRun.args, __filename, '--child', variant, '--awaits', String(config.awaits), '--timers', String(config.timers)];
  const [command, argv] = config.cpu === null ? [nodeRun.bin, args] : ['taskset', ['-c', String(config.cpu), nodeRun.bin, ...args]];
  return new Promise((resolve, reject) => {
    execFile(command, argv, { encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${variant}: ${stderr.trim() || err.message}`));
      resolve(JSON.parse(stdout.trim().split('\n').pop()));
    });
  });
}

// Schema 'nodejs' is measured where it is in effect (AsyncContextFrame and a V8 addon for the ABI).
function variantsFor(nodeRun) {
  const probe = `console.log(new (require(${JSON.stringify(PACKAGE_DIR)}).ThreadContextManager)({ schema: 'nodejs' }).schema)`;
  const schema = execFileSync(nodeRun.bin, [...nodeRun.args.filter((a) => a.startsWith('--')), '--no-warnings', '-e', probe], { encoding: 'utf8' }).trim();
  return schema === 'nodejs' ? VARIANTS : VARIANTS.filter((v) => v !== 'nodejs');
}

async function runVersion(nodeRun, config) {
  const flags = nodeRun.args.filter((a) => a.startsWith('--')).join(' ');
  const node = `${nodeVersion(nodeRun.bin)}${flags === '' ? '' : ` ${flags}`}`;
  const loadBefore = loadAverage();
  const startedAt = new Date();
  const variants = variantsFor(nodeRun);
  process.stderr.write(`switch on Node ${node}: ${config.rounds} rounds × ${variants.join(' ')}; load average ${loadBefore.join(' ')}\n`);
  const samples = await alternate({
    rounds: config.rounds,
    modes: variants,
    measure: (variant) => runChild(nodeRun, config, variant),
    onSample: (s) => process.stderr.write(`  round ${s.round} ${s.mode}: ${s.perAwait.toFixed(1)} ns/await, ${s.perTimer.toFixed(1)} ns/timer, ${s.perWith.toFixed(1)} ns/with\n`),
  });
  return { node, samples, startedAt, finishedAt: new Date(), loadBefore, loadAfter: loadAverage() };
}

function row(run) {
  const s = run.samples;
  const of = (variant, what) => median(s.filter((x) => x.mode === variant).map((x) => x[what]));
  const has = (variant) => s.some((x) => x.mode === variant);
  const diff = (a, b, what) => (has(a) ? interval(pairedDifference(s, a, b, (x) => x[what]), 1, { sign: true }) : '–');
  const mechanism = s.find((x) => x.mode === 'thread').mechanism;
  return `| ${run.node} | ${mechanism} | ${fixed(of('stock', 'perAwait'), 1)} | ${diff('floor', 'stock', 'perAwait')} | ` +
    `**${diff('thread', 'stock', 'perAwait')}** | **${diff('thread', 'floor', 'perAwait')}** | ${fixed(of('stock', 'perTimer'), 1)} | ` +
    `${diff('floor', 'stock', 'perTimer')} | ${diff('thread', 'stock', 'perTimer')} | ${diff('thread', 'floor', 'perTimer')} | ` +
    `${diff('cheap', 'stock', 'perAwait')} | ${diff('thread', 'stock', 'perWith')} | ` +
    `**${diff('nodejs', 'stock', 'perAwait')}** | ${diff('nodejs', 'stock', 'perTimer')} | ${diff('nodejs', 'stock', 'perWith')} |`;
}

function report(result) {
  const first = result.runs[0];
  const last = result.runs[result.runs.length - 1];
  const { nproc, cpuModel, kernel } = result.machine;
  return [
    `#### Per async switch — ${utcMinute(first.startedAt)}`,
    '',
    `Machine: ${nproc} × ${cpuModel}, ${kernel}. ${result.config.cpu === null ? 'Not pinned' : `Pinned to CPU ${result.config.cpu}`}; ` +
      `${result.config.rounds} rounds, the variants alternated (order rotating) in fresh processes; in each, the median of ` +
      `3 batches of ${result.config.awaits} awaits, 9 of ${result.config.timers} timers, 3 of 200,000 with() calls (thread CPU time). ` +
      `Load average ${first.loadBefore.join(' / ')} before, ${last.loadAfter.join(' / ')} after.`,
    '',
    '| Node | mechanism | stock ns/await | floor − stock ns/await | **manager − stock** ns/await | **manager − floor** ns/await | stock ns/timer | floor − stock ns/timer | manager − stock ns/timer | manager − floor ns/timer | cheap − stock ns/await | manager − stock ns/`with()` | **nodejs − stock** ns/await | nodejs − stock ns/timer | nodejs − stock ns/`with()` |',
    '|---|---|---:|---|---|---|---:|---|---|---|---|---|---|---|---|',
    ...result.runs.map(row),
    '',
    `Command: \`${result.command}\` at ${result.revision}. Per round, a variant's figure minus the stock's (or the floor's) ` +
      'of the same round; median over rounds [95 % bootstrap interval]; "(noise)": the interval contains 0.',
  ].join('\n');
}

async function main() {
  const config = parse(process.argv.slice(2));
  if (config.child !== undefined) {
    const result = await child(config.child, config);
    process.stdout.write(JSON.stringify(result) + '\n');
    return;
  }
  const revision = measuredRevision(codeRevision); // before the run: not a commit made during it
  const runs = [];
  for (const nodeRun of config.nodeRuns) runs.push(await runVersion(nodeRun, config));
  const command = commandLine(['npm run bench:switch --', ...process.argv.slice(2)].join(' ').replace(/ --$/, ''));
  const { nodeRuns, child: _, json, ...shown } = config;
  const result = { command, config: shown, machine: describeMachine(), revision, runs };
  if (json !== undefined) fs.writeFileSync(json, JSON.stringify(result, null, 2) + '\n');
  process.stdout.write(report(result) + '\n');
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
