'use strict';
// One measured run of the span workload in one mode, in its own process (run.js starts it):
//   node child.js --mode NAME [--package DIR] --requests N --warmup N --in-flight N [--cpu N]
//     [--calibrate]
// Prints one JSON line: the main thread's CPU time over the measured requests (the hooks and the
// manager run there; libuv's pool threads do the stat calls, the same in every mode), its
// runnable-but-waiting time, process CPU, and the CPU's steal over the window.
// --calibrate counts the callbacks the manager's hooks see per request instead (not timed);
// --gc-before-window runs a full GC before the window (node --expose-gc; instructions.js uses it).

const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');
const { modeByName, buildManager, mechanismOf } = require('./modes');
const { createWorkload } = require('./workload');
const { installCountingHooks } = require('../lib/hook-modes');
const { threadTimes } = require('../lib/thread-cpu');
const { cpuTimes } = require('../lib/machine');
const { PACKAGE_DIR } = require('../lib/package-copy');

const SELF_CHECKS = 50;

function parse() {
  const { values } = parseArgs({
    options: {
      mode: { type: 'string' },
      package: { type: 'string', default: PACKAGE_DIR },
      requests: { type: 'string', default: '60000' },
      warmup: { type: 'string', default: '10000' },
      'in-flight': { type: 'string', default: '50' },
      cpu: { type: 'string' },
      calibrate: { type: 'boolean', default: false },
      'gc-before-window': { type: 'boolean', default: false },
    },
  });
  const int = (name) => {
    const v = Number(values[name]);
    if (!Number.isInteger(v) || v <= 0) throw new TypeError(`--${name}: expected a positive integer, got ${JSON.stringify(values[name])}`);
    return v;
  };
  return {
    modeName: values.mode, mode: modeByName(values.mode), packageDir: path.resolve(values.package),
    requests: int('requests'), warmup: int('warmup'), inFlight: int('in-flight'),
    cpu: values.cpu === undefined ? null : Number(values.cpu), calibrate: values.calibrate,
    gcBeforeWindow: values['gc-before-window'],
  };
}

// Manager modes must really publish: inside the child span, after its await, the record (read
// back as a sampler would see it: the TLS record, or the nodejs schema's walk from the frame)
// shows the child span.
async function selfCheck(workload, pkg, manager) {
  let checks = 0;
  const mismatches = [];
  const read = manager.schema === 'nodejs' ? pkg.getFrameSpanContext : pkg.getSpanContext;
  workload.onChildAwaited((span) => {
    checks++;
    const seen = read();
    if (seen === null || seen.spanId !== span.spanContext().spanId) {
      if (mismatches.length < 3) mismatches.push(`record shows ${seen && seen.spanId}, expected ${span.spanContext().spanId}`);
    }
  });
  await workload.runRequests(SELF_CHECKS);
  workload.onChildAwaited(null);
  if (checks !== SELF_CHECKS || mismatches.length > 0) {
    throw new Error(`self-check: expected the child span in the record ${SELF_CHECKS} times, got ${checks - mismatches.length}: ${mismatches.join('; ')}`);
  }
}

async function calibrate(config, workload, mechanism) {
  await workload.runRequests(config.warmup);
  const { counts, uninstall } = installCountingHooks(mechanism);
  await workload.runRequests(config.requests);
  uninstall();
  const per = (n) => n / config.requests;
  return {
    mechanism,
    asyncHooksBeforePerRequest: per(counts.asyncHooksBefore),
    promiseHooksBeforePerRequest: per(counts.promiseHooksBefore),
    initPerRequest: per(counts.init),
  };
}

async function main() {
  const config = parse();
  const { manager, pkg } = buildManager(config.mode, config.packageDir);
  const workload = createWorkload(manager, { inFlight: config.inFlight });
  const mechanism = manager.mechanism ?? 'AsyncLocalStorage';
  if (config.calibrate) {
    process.stdout.write(JSON.stringify(await calibrate(config, workload, mechanismOf(pkg ?? require(PACKAGE_DIR)))) + '\n');
    return;
  }
  const checked = config.mode.kind === 'manager' && config.mode.selfCheck !== false;
  if (config.mode.managerOptions?.schema !== undefined && manager.schema !== config.mode.managerOptions.schema) {
    throw new Error(`mode ${config.modeName}: the manager publishes with schema ${manager.schema} (${manager.schemaFallback})`);
  }
  if (checked) await selfCheck(workload, pkg, manager);
  await workload.runRequests(config.warmup);

  const cpuBefore = config.cpu === null ? null : cpuTimes(config.cpu);
  const processBefore = process.cpuUsage();
  const wallBefore = process.hrtime.bigint();
  // os.getPriority() marks the window for instruction counting under valgrind (instructions.js
  // dumps callgrind's counters whenever uv_os_getpriority is entered); elsewhere it is a syscall.
  // Instruction counts (instructions.js): a full GC first, so that no mode carries a major GC
  // that another mode's warm-up happened to trigger into its window.
  if (config.gcBeforeWindow) {
    if (typeof globalThis.gc !== 'function') throw new Error('--gc-before-window: expected node --expose-gc');
    globalThis.gc();
  }
  os.getPriority();
  const before = threadTimes();
  await workload.runRequests(config.requests);
  const after = threadTimes();
  os.getPriority();
  const wallNs = Number(process.hrtime.bigint() - wallBefore);
  const processCpu = process.cpuUsage(processBefore);
  const cpuAfter = config.cpu === null ? null : cpuTimes(config.cpu);

  await workload.provider.forceFlush();
  const spans = workload.exporter.spans;
  const expectedSpans = 2 * (config.requests + config.warmup + (checked ? SELF_CHECKS : 0));
  if (spans !== expectedSpans) throw new Error(`expected ${expectedSpans} exported spans, got ${spans}`);
  process.stdout.write(JSON.stringify({
    mode: config.modeName,
    mechanism,
    node: process.version,
    requests: config.requests,
    threadCpuNsPerRequest: (after.cpuNs - before.cpuNs) / config.requests,
    threadWaitNsPerRequest: (after.waitNs - before.waitNs) / config.requests,
    processCpuNsPerRequest: (processCpu.user + processCpu.system) * 1000 / config.requests,
    wallNsPerRequest: wallNs / config.requests,
    stealPercent: cpuAfter === null ? null : (cpuAfter.stealUs - cpuBefore.stealUs) / (wallNs / 1000) * 100,
    bodyBytesPerRequest: workload.bodyBytes() / (config.requests + config.warmup),
  }) + '\n');
  await workload.provider.shutdown();
}

main().catch((err) => {
  process.stderr.write(`span-workload child: ${err.stack}\n`);
  process.exit(1);
});
