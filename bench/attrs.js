'use strict';
// Cost of record attributes per context switch: 0, 2 and 5 attributes per span, measured in the
// same run, one process per variant and round (the key map is process-wide and append-only),
// alternating, medians of the rounds. Per variant:
//   - ns per with() alternating between two spans: every call publishes a different span's body
//     (ids + attrs-data) and restores the other one, i.e. 2 switches with a body rewrite each;
//   - ns per await inside a span (span / none alternation: the body stays, only the control word);
//   - ns per span of building its entry once (startSpan with attributes + first activation).
// Spans always have the same five attributes; the variants register 0, 2 or 5 of their keys.
// Options: --rounds N (default 5).

process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
const { execFileSync } = require('node:child_process');
const { trace, context, ROOT_CONTEXT } = require('@opentelemetry/api');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');

const ATTRIBUTES = {
  'http.route': '/api/users/:id',
  'http.request.method': 'GET',
  'tenant.id': 'tenant-4242',
  'deployment.region': 'eu-west-1',
  'app.operation': 'checkout.submit',
};
const VARIANTS = [0, 2, 5];
const WITHS = 200000;
const AWAITS = 200000;
const SPANS = 20000;

const roundsAt = process.argv.indexOf('--rounds');
const ROUNDS = roundsAt === -1 ? 5 : Number(process.argv[roundsAt + 1]);
if (!Number.isInteger(ROUNDS) || ROUNDS <= 0) throw new RangeError(`--rounds: expected a positive integer, got ${process.argv[roundsAt + 1]}`);

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const elapsed = (start, n) => Number(process.hrtime.bigint() - start) / n;

async function child(count) {
  const lib = require('..');
  const keys = Object.keys(ATTRIBUTES).slice(0, count);
  const manager = lib.register(count === 0 ? {} : { attributes: keys });
  trace.setGlobalTracerProvider(new BasicTracerProvider());
  const tracer = trace.getTracer('bench');
  // Every variant's spans carry all five attributes: only how many are registered (and so are
  // in the records) differs, so the deltas are this package's cost, not the SDK's.
  const attributes = ATTRIBUTES;
  const recorded = Object.values(ATTRIBUTES).slice(0, count);
  const a = trace.setSpan(ROOT_CONTEXT, tracer.startSpan('a', { attributes }));
  const b = trace.setSpan(ROOT_CONTEXT, tracer.startSpan('b', { attributes }));
  // The records really carry the attributes.
  manager.with(a, () => {
    const view = lib.recordView();
    const size = view[26] | (view[27] << 8);
    const want = recorded.reduce((n, v) => n + 2 + Buffer.byteLength(v), 0);
    if (view[24] !== 1 || size !== want) throw new Error(`bench: expected ${want} attrs bytes in the record, got ${size}`);
  });

  const fn = () => {};
  const perWith = () => {
    const start = process.hrtime.bigint();
    for (let i = 0; i < WITHS; i++) manager.with(i & 1 ? a : b, fn);
    return elapsed(start, WITHS);
  };
  const perAwait = () => context.with(a, async () => {
    const start = process.hrtime.bigint();
    for (let i = 0; i < AWAITS; i++) await null;
    return elapsed(start, AWAITS);
  });
  const perSpan = () => {
    const start = process.hrtime.bigint();
    for (let i = 0; i < SPANS; i++) {
      const span = tracer.startSpan('s', { attributes });
      manager.with(trace.setSpan(ROOT_CONTEXT, span), fn);
    }
    return elapsed(start, SPANS);
  };
  perWith(); await perAwait(); perSpan(); // warm-up
  const w = []; const aw = []; const s = [];
  for (let i = 0; i < 3; i++) { w.push(perWith()); aw.push(await perAwait()); s.push(perSpan()); }
  process.stdout.write(JSON.stringify({ with: median(w), await: median(aw), span: median(s) }) + '\n');
}

function main() {
  const childAt = process.argv.indexOf('--child');
  if (childAt !== -1) return child(Number(process.argv[childAt + 1]));
  const runs = Object.fromEntries(VARIANTS.map((n) => [n, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const n of VARIANTS) {
      const out = execFileSync(process.execPath, [...process.execArgv, __filename, '--child', String(n)], { encoding: 'utf8' });
      runs[n].push(JSON.parse(out.trim().split('\n').pop()));
    }
  }
  const m = Object.fromEntries(VARIANTS.map((n) => [n, {
    with: median(runs[n].map((r) => r.with)), await: median(runs[n].map((r) => r.await)), span: median(runs[n].map((r) => r.span)),
  }]));
  const f = (x) => x.toFixed(1);
  const d = (x) => (x >= 0 ? '+' : '') + x.toFixed(1);
  console.log(`node ${process.version}: medians of ${ROUNDS} processes per variant (ThreadContextManager, SDK spans)`);
  console.log('| attributes | attrs bytes | ns/with() (2 switches) | added per switch vs 0 | ns/await | added vs 0 | ns/span (entry built once) | added vs 0 |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const n of VARIANTS) {
    const bytes = Object.values(ATTRIBUTES).slice(0, n).reduce((s, v) => s + 2 + Buffer.byteLength(v), 0);
    console.log(`| ${n} | ${bytes} | ${f(m[n].with)} | ${d((m[n].with - m[0].with) / 2)} | ${f(m[n].await)} | ` +
      `${d(m[n].await - m[0].await)} | ${f(m[n].span)} | ${d(m[n].span - m[0].span)} |`);
  }
  return undefined;
}

Promise.resolve().then(main).catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
