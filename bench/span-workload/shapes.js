'use strict';
// Do the manager's stores change the hidden classes (maps) of the SDK's Context and Span objects,
// and so make the SDK's own code see more maps? Runs the span workload in one mode and clusters
// the maps of (1) the spans the SDK exports and (2) the contexts active inside requests, with
// V8's %HaveSameMap, and compares them with a span and a context the manager never saw.
// One mode per process (needs --allow-natives-syntax):
//   node --allow-natives-syntax bench/span-workload/shapes.js MODE [PACKAGE_DIR]
// Prints one JSON line. v8-diagnostics.js runs it for each mode beside a --trace-deopt run.

const { context, trace, ROOT_CONTEXT, createContextKey } = require('@opentelemetry/api');
const { modeByName, buildManager } = require('./modes');
const { createWorkload } = require('./workload');
const { ROOT } = require('../lib/package-copy');

const KEEP = 200;

const haveSameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)');

// Groups objects by map: returns the group sizes, largest first, and the index of the group of
// each reference object (-1: a map none of the objects has).
function clusterMaps(objects, references) {
  const groups = [];
  for (const o of objects) {
    const g = groups.find((group) => haveSameMap(group.example, o));
    if (g === undefined) groups.push({ example: o, count: 1 });
    else g.count++;
  }
  groups.sort((a, b) => b.count - a.count);
  const referenceGroups = Object.fromEntries(Object.entries(references)
    .map(([name, ref]) => [name, groups.findIndex((g) => haveSameMap(g.example, ref))]));
  return { groups: groups.map((g) => g.count), referenceGroups };
}

async function main() {
  const [modeName, packageDir = ROOT] = process.argv.slice(2);
  const { manager } = buildManager(modeByName(modeName), packageDir);
  const workload = createWorkload(manager, { inFlight: 50 });
  const spans = [];
  const contexts = [];
  const exporter = workload.exporter;
  const exportSpans = exporter.export.bind(exporter);
  exporter.export = (batch, done) => {
    for (const s of batch) if (spans.length < KEEP) spans.push(s);
    exportSpans(batch, done);
  };
  workload.onChildAwaited(() => {
    if (contexts.length < KEEP) contexts.push(context.active());
  });
  await workload.runRequests(5000);
  await workload.provider.forceFlush();
  // References the manager never activated: a span only started and ended, a derived context.
  const tracer = trace.getTracer('span-workload');
  const plainSpan = tracer.startSpan('never-activated');
  plainSpan.end();
  const plainContext = trace.setSpan(ROOT_CONTEXT.setValue(createContextKey('k'), 1), plainSpan);
  process.stdout.write(JSON.stringify({
    mode: modeName,
    node: process.version,
    spans: clusterMaps(spans, { neverActivated: plainSpan }),
    contexts: clusterMaps(contexts, { neverActivated: plainContext }),
  }) + '\n');
}

main().catch((err) => {
  process.stderr.write(`shapes: ${err.stack}\n`);
  process.exit(1);
});
