'use strict';
// Per-switch cost of ThreadContextManager over the stock AsyncLocalStorageContextManager, measured
// in the same run, one process per variant and round, alternating, median of 5 rounds each:
//   - per `await null` inside an active span (thread CPU time, like everything here)
//   - per timer callback: setTimeout(cb, 0) scheduled and run in a span (see nsPerTimer)
//   - per with() call alternating between two spans (synchronous; what cheap mode costs)
// Run under every Node version with: scripts/node-matrix.sh bench
// Options: --rounds N (default 5), --awaits N (default 300000), --timers N (default 20000).
// Medians of thread CPU time; on this shared 2-vCPU VM repeated runs still differ by ±30 ns.

process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
const { execFileSync } = require('node:child_process');
const { trace, ROOT_CONTEXT } = require('@opentelemetry/api');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
const { ThreadContextManager, getSpanContext } = require('..');
const { trackAsyncCallbacks } = require('../js/hooks');

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  if (at === -1) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value <= 0) {
    throw new RangeError(`--${name}: expected a positive integer, got ${process.argv[at + 1]}`);
  }
  return value;
}
const ROUNDS = option('rounds', 5);
const AWAITS = option('awaits', 300000);
const TIMERS = option('timers', 20000);

const span = new BasicTracerProvider().getTracer('bench').startSpan('bench');
const spanContext = trace.setSpan(ROOT_CONTEXT, span);

// CPU time of this thread (the addon reads CLOCK_THREAD_CPUTIME_ID): on this shared VM wall time
// includes what the hypervisor steals, and process.cpuUsage() adds V8's helper threads.
const { __benchThreadCpuTimeNs: threadCpuTimeNs } = require('../otel-thread-ctx.linux-x64-gnu.node');

async function awaitLoop(n) {
  for (let i = 0; i < n; i++) await null;
}

function nsPerAwait(manager) {
  return manager.with(spanContext, async () => {
    const start = threadCpuTimeNs();
    await awaitLoop(AWAITS);
    return (threadCpuTimeNs() - start) / AWAITS;
  });
}

// Thread CPU time from scheduling the timers (init hooks) to the last callback (before/after
// hooks); the idle wait for the 1 ms timeout costs no CPU.
function nsPerTimer(manager) {
  return manager.with(spanContext, () => new Promise((resolve) => {
    let left = TIMERS;
    const tick = () => {
      if (--left === 0) resolve((threadCpuTimeNs() - start) / TIMERS);
    };
    const start = threadCpuTimeNs();
    for (let i = 0; i < TIMERS; i++) setTimeout(tick, 0);
  }));
}

// with() alternating between two spans, so that every call publishes and restores.
const otherContext = trace.setSpan(ROOT_CONTEXT, new BasicTracerProvider().getTracer('bench').startSpan('other'));
const WITHS = 200000;
function nsPerWith(manager) {
  let sink = 0;
  const fn = () => { sink++; };
  const start = threadCpuTimeNs();
  for (let i = 0; i < WITHS; i++) manager.with(i & 1 ? spanContext : otherContext, fn);
  const ns = (threadCpuTimeNs() - start) / WITHS;
  if (sink !== WITHS) throw new Error('bench: with() did not run its function');
  return ns;
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const VARIANTS = {
  stock: () => new AsyncLocalStorageContextManager().enable(),
  thread: () => new ThreadContextManager().enable(),
  cheap: () => new ThreadContextManager({ asyncTracking: false }).enable(),
  // The same hooks as `thread` with empty bodies: what Node itself charges for the mechanism.
  floor: () => {
    const manager = new AsyncLocalStorageContextManager().enable();
    trackAsyncCallbacks(() => undefined, () => {}, () => {});
    return manager;
  },
};

// One variant per process: enabling and disabling hooks leaves state behind in Node's async_hooks
// (e.g. megamorphic feedback in its emit loop) that would slow down whatever is measured next.
async function child(name) {
  const manager = VARIANTS[name]();
  // Within a process: warm-up, then the median of several batches (timer batches are noisy).
  await nsPerAwait(manager);
  await nsPerTimer(manager);
  nsPerWith(manager);
  const awaits = [];
  const timers = [];
  const withs = [];
  for (let batch = 0; batch < 3; batch++) awaits.push(await nsPerAwait(manager));
  for (let batch = 0; batch < 9; batch++) timers.push(await nsPerTimer(manager));
  for (let batch = 0; batch < 3; batch++) withs.push(nsPerWith(manager));
  const perAwait = median(awaits);
  const perTimer = median(timers);
  const perWith = median(withs);
  if (name === 'thread') {
    // The measured manager really publishes: the record shows the span inside with().
    manager.with(spanContext, () => {
      if (getSpanContext()?.spanId !== span.spanContext().spanId) throw new Error('bench: expected the span published');
    });
  }
  process.stdout.write(JSON.stringify({ perAwait, perTimer, perWith, mechanism: manager.mechanism ?? 'stock' }) + '\n');
}

function runChild(name) {
  const args = [...process.execArgv, __filename, '--child', name, '--awaits', String(AWAITS), '--timers', String(TIMERS)];
  const out = execFileSync(process.execPath, args, { encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').pop());
}

function main() {
  const childAt = process.argv.indexOf('--child');
  if (childAt !== -1) {
    const name = process.argv[childAt + 1];
    if (!(name in VARIANTS)) throw new RangeError(`--child: expected one of ${Object.keys(VARIANTS).join(', ')}, got ${name}`);
    return child(name);
  }
  const results = { stock: [], thread: [], cheap: [], floor: [] };
  let mechanism;
  // Alternate the variants round by round so that machine noise hits them alike.
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of Object.keys(results)) {
      const result = runChild(name);
      results[name].push(result);
      if (name === 'thread') mechanism = result.mechanism;
    }
  }
  const m = {};
  for (const [name, runs] of Object.entries(results)) {
    m[name] = {
      await: median(runs.map((r) => r.perAwait)),
      timer: median(runs.map((r) => r.perTimer)),
      with: median(runs.map((r) => r.perWith)),
    };
  }
  const f = (x) => x.toFixed(1);
  const acf = process.execArgv.includes('--experimental-async-context-frame') ? '+ACF flag' : '';
  console.log(`node ${process.version}${acf}: mechanism ${mechanism}; medians of ${ROUNDS} processes per variant ` +
    `(${AWAITS} awaits, ${TIMERS} timers each)`);
  console.log('| node | mechanism | stock ns/await | added ns/await | of which hooks floor | stock ns/timer | added ns/timer | of which hooks floor | cheap mode added ns/await | added ns/with() |');
  const added = (name, what) => f(m[name][what] - m.stock[what]);
  console.log(`| ${process.version}${acf} | ${mechanism} | ${f(m.stock.await)} | **${added('thread', 'await')}** | ` +
    `${added('floor', 'await')} | ${f(m.stock.timer)} | **${added('thread', 'timer')}** | ${added('floor', 'timer')} | ` +
    `${added('cheap', 'await')} | ${added('thread', 'with')} |`);
  span.end();
  return undefined;
}

Promise.resolve().then(main).catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
