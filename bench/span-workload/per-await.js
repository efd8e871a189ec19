'use strict';
// Per-await cost, for instructions.js --workload per-await: inside one active span, a loop of
// `await null` (one promise reaction per await: the hooks' before and after, the context lookup,
// the record left as it is since the span does not change). No I/O, so the count is the same from
// process to process; bench/switch.js measures the same loop in CPU time.
//   node bench/span-workload/per-await.js --child MODE --package DIR --awaits N

const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');
const { modeByName, buildManager } = require('./modes');
const { positiveInteger } = require('../lib/args');
const { PACKAGE_DIR } = require('../lib/package-copy');

async function child(modeName, packageDir, awaits) {
  const { trace, ROOT_CONTEXT } = require('@opentelemetry/api');
  const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
  const { manager } = buildManager(modeByName(modeName), packageDir);
  manager.enable();
  const span = new BasicTracerProvider().getTracer('per-await').startSpan('s');
  const run = async (n) => {
    for (let i = 0; i < n; i++) await null;
  };
  await manager.with(trace.setSpan(ROOT_CONTEXT, span), async () => {
    await run(awaits);
    // Marks the window (callgrind dumps before uv_os_getpriority), after a full GC.
    if (typeof globalThis.gc === 'function') globalThis.gc();
    os.getPriority();
    await run(awaits);
    os.getPriority();
  });
  span.end();
}

const { values } = parseArgs({
  options: { child: { type: 'string' }, package: { type: 'string', default: PACKAGE_DIR }, awaits: { type: 'string', default: '100000' } },
});
if (values.child === undefined) throw new TypeError('per-await.js: expected --child MODE (run it through instructions.js --workload per-await)');
child(values.child, path.resolve(values.package), positiveInteger('awaits', values.awaits)).catch((err) => {
  process.stderr.write(`per-await: ${err.stack}\n`);
  process.exit(1);
});
