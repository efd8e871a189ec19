'use strict';
// End to end, one request across two services (issue 42): a GraphQL gateway (gateway.js:
// graphql-http, every operation `POST /graphql`) that calls an Express inventory service
// (inventory.js) over fetch, each its own process with NodeSDK and the package's context
// manager; `thread-ctx agent` (eBPF, off-CPU on) samples both, the project's Collector joins,
// Jaeger stores. Read back from Jaeger: no gateway holder is named by an inventory route; the
// gateway's requests are routed by their GraphQL operation; the gateway's root span names
// inventory's hot function on its path (the thread_ctx.path event) where inventory burnt CPU;
// fetch's client spans carry thread.id (ThreadSpanProcessor). From the Collector's files: the
// latency histograms name the gateway's requests by operation, and `report --traces` prints the
// path per route.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { execFileSync } = require('node:child_process');
const pipeline = require('../../demo/pipeline');
const { runDir } = require('./run-dir');
const { needs } = require('../helpers/needs');
const { AGENT_FLAGS, OPERATIONS, startServices, runLoad, readBack, checkHolders, checkRouted, checkHotPath } = require('./graphql-shop');

const need = needs(process.getuid() !== 0 && 'thread-ctx agent needs root to load its eBPF programs');

test('a GraphQL gateway and the service it calls: holders named by their own service, operations as routes, the path with inventory\'s cause', { skip: need.skip, timeout: 300_000 }, need.guard(async (t) => {
  const why = pipeline.missing();
  assert.equal(why, null, why);
  const { dir, procs } = runDir(t, 'graphql-path-e2e');

  const jaeger = await pipeline.startJaeger(dir);
  procs.push(jaeger);
  const collector = await pipeline.startCollector(dir, jaeger.otlpGrpc, '10s');
  procs.push(collector);
  const { gateway, inventory } = await startServices(procs, collector.http, collector.http);
  procs.push(await pipeline.startAgent(gateway.pid, collector.grpc, ['--pid', String(inventory.pid), ...AGENT_FLAGS]));

  const { from, to } = await runLoad(gateway);
  const { ofService, roots, stock } = await readBack(t, jaeger.queryHttp, from, to);

  await t.test('no gateway held_by names an inventory route', () => checkHolders(t, ofService('gateway')));

  await t.test("the gateway's fetch client spans carry thread.id, as its server spans do", () => {
    const calls = ofService('gateway').filter((s) => s.attrs['server.address'] !== undefined && !s.server);
    assert.ok(calls.length >= 100, `only ${calls.length} fetch client spans`);
    const without = calls.filter((s) => s.attrs['thread.id'] !== gateway.pid);
    assert.equal(without.length, 0, `${without.length} of ${calls.length} client spans without the main thread's thread.id`);
  });

  await t.test('at least 90 % of the gateway\'s requests are routed by their GraphQL operation', () => checkRouted(t, roots));

  await t.test('where inventory burnt 15 ms or more of its own CPU, at least 80 % of the gateway roots name its hot function on their path', () => {
    checkHotPath(t, roots, stock);
  });

  await t.test("the latency histograms name the gateway's requests by their operation, as the connector does", () => {
    // span_metrics' file: OTLP JSON lines (an empty export is `{}`); each POST series (the gateway's server spans) carries
    // the connector's route as its thread_ctx.route dimension.
    const points = fs.readFileSync(collector.files.metrics, 'utf8').split('\n').filter(Boolean).flatMap((line) =>
      (JSON.parse(line).resourceMetrics ?? []).flatMap((rm) => (rm.scopeMetrics ?? []).flatMap((sm) => (sm.metrics ?? []).flatMap((m) =>
        (m.histogram?.dataPoints ?? m.sum?.dataPoints ?? []).map((p) => Object.fromEntries((p.attributes ?? []).map((a) => [a.key, a.value.stringValue])))))));
    const posts = points.filter((p) => p['span.name'] === 'POST');
    const routes = new Set(posts.map((p) => p['thread_ctx.route']));
    t.diagnostic(`POST series routes: ${[...routes].join(', ')}`);
    assert.ok(posts.length > 0, 'no latency series of the gateway\'s requests');
    assert.deepEqual([...routes].sort(), OPERATIONS.map((o) => o.route).sort());
  });

  await t.test('report --traces prints the path across services, per route', () => {
    const text = execFileSync(pipeline.BIN.threadCtx, ['report', '--traces', collector.files.traces], { encoding: 'utf8' });
    const block = text.split('\n\n').find((b) => b.startsWith('query ProductPage: the slowest 1 %')) ?? '';
    assert.match(block, /the route is the GraphQL operation they executed/, text);
    assert.match(block, /path across services \(\d+ of \d+ requests?/, block);
    assert.match(block, /^ {4}waiting on inventory \/stock\/:sku\s+\d+\.\d ms/m, block);
  });
}));
