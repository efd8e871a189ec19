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
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const pipeline = require('../../demo/pipeline');
const { findSpans } = require('./jaeger');
const { runDir } = require('./run-dir');

const isRoot = process.getuid() === 0;
const requireEbpf = process.env.REQUIRE_EBPF === '1';
const LOAD_MS = 20_000;
const INVENTORY_ROUTES = ['/stock/:sku', '/price/:sku'];

const OPERATIONS = [
  { route: 'query ProductPage', body: (n) => ({ query: 'query ProductPage($sku: String!) { product(sku: $sku) { sku stock price } }', variables: { sku: `sku-${1000 + (n % 40)}` } }) },
  { route: 'query Health', body: () => ({ query: 'query Health { health }' }) },
  { route: 'query (anonymous)', body: () => ({ query: '{ health }' }) },
];

// One client: ProductPage twice as often as each of the others.
async function client(port, going) {
  for (let n = 0; going(); n++) {
    const op = OPERATIONS[[0, 0, 1, 2][n % 4]];
    const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(op.body(n)),
    });
    const out = await res.json();
    if (out.errors) throw new Error(`gateway: ${JSON.stringify(out.errors)}`);
  }
}

const profileOf = (s) => s.events.find((e) => e.name === 'thread_ctx.profile');
const pathOf = (s) => s.events.find((e) => e.name === 'thread_ctx.path');

test('a GraphQL gateway and the service it calls: holders named by their own service, operations as routes, the path with inventory\'s cause', {
  skip: !isRoot && !requireEbpf ? 'needs root: the eBPF agent (REQUIRE_EBPF=1 makes this a failure)' : false,
  timeout: 300_000,
}, async (t) => {
  assert.ok(isRoot, 'REQUIRE_EBPF=1 but not root: thread-ctx agent needs root');
  const why = pipeline.missing();
  assert.equal(why, null, why);
  const { dir, procs } = runDir(t, 'graphql-path-e2e');

  const jaeger = await pipeline.startJaeger(dir);
  procs.push(jaeger);
  const collector = await pipeline.startCollector(dir, jaeger.otlpGrpc, '10s');
  procs.push(collector);
  const inventory = await pipeline.startService(path.join(__dirname, 'inventory.js'), collector.http, { OTEL_SERVICE_NAME: 'inventory' });
  procs.push(inventory);
  const gateway = await pipeline.startService(path.join(__dirname, 'gateway.js'), collector.http,
    { OTEL_SERVICE_NAME: 'gateway', INVENTORY_URL: `http://127.0.0.1:${inventory.port}` });
  procs.push(gateway);
  const agent = await pipeline.startAgent(gateway.pid, collector.grpc, ['--pid', String(inventory.pid), '--hz', '99', '--interval', '2', '--off-cpu']);
  procs.push(agent);

  const from = Date.now();
  let going = true;
  const clients = [client(gateway.port, () => going), client(gateway.port, () => going)];
  await sleep(LOAD_MS);
  going = false;
  await Promise.all(clients);
  const to = Date.now();

  // Spans wait for the windows that cover them (2 s), then max_wait at most; read until the
  // gateway's requests are enriched (capped).
  let spans = [];
  const ofService = (name) => spans.filter((s) => s.resource['service.name'] === name);
  for (let i = 0; i < 30; i++) {
    await sleep(2_000);
    spans = await findSpans(jaeger.queryHttp, 'gateway', from, to);
    const roots = ofService('gateway').filter((s) => s.server);
    if (roots.length > 0 && roots.filter((s) => profileOf(s)).length >= 0.95 * roots.length && i >= 5) break;
  }
  const roots = ofService('gateway').filter((s) => s.server);
  const stock = ofService('inventory').filter((s) => s.server && s.route === '/stock/:sku');
  t.diagnostic(`gateway: ${roots.length} requests; inventory: ${stock.length} /stock requests`);
  assert.ok(roots.length >= 100, `only ${roots.length} gateway requests in Jaeger`);

  await t.test('no gateway held_by names an inventory route', () => {
    const entries = ofService('gateway').flatMap((s) => {
      const ev = profileOf(s);
      return ev ? [...(ev.attrs.held_by ?? []), ...(ev.attrs.held_by_routes ?? [])] : [];
    });
    t.diagnostic(`gateway held_by entries: ${entries.length}`);
    assert.ok(entries.length >= 20, `only ${entries.length} held_by entries on gateway spans: nothing to check`);
    const wrong = entries.filter((e) => INVENTORY_ROUTES.some((r) => e.startsWith(`${r} `)));
    assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} of ${entries.length} gateway held_by entries name an inventory route`);
  });

  await t.test("the gateway's fetch client spans carry thread.id, as its server spans do", () => {
    const calls = ofService('gateway').filter((s) => s.attrs['server.address'] !== undefined && !s.server);
    assert.ok(calls.length >= 100, `only ${calls.length} fetch client spans`);
    const without = calls.filter((s) => s.attrs['thread.id'] !== gateway.pid);
    assert.equal(without.length, 0, `${without.length} of ${calls.length} client spans without the main thread's thread.id`);
  });

  await t.test('at least 90 % of the gateway\'s requests are routed by their GraphQL operation', () => {
    const routes = new Set(OPERATIONS.map((o) => o.route));
    const routed = roots.filter((s) => routes.has(s.attrs['thread_ctx.route']) && s.attrs['thread_ctx.route.source'] === 'graphql');
    t.diagnostic(`routed by operation: ${routed.length} of ${roots.length}; routes: ${[...new Set(roots.map((s) => s.attrs['thread_ctx.route']))].join(', ')}`);
    assert.ok(routed.length >= 0.9 * roots.length, `${routed.length} of ${roots.length} routed by operation`);
  });

  await t.test('where inventory burnt 15 ms or more of its own CPU, at least 80 % of the gateway roots name its hot function on their path', () => {
    const hotTraces = new Set(stock.filter((s) => (s.attrs['thread_ctx.cpu.trace_ms'] ?? 0) >= 15).map((s) => s.traceId));
    const hotRoots = roots.filter((s) => hotTraces.has(s.traceId));
    const named = hotRoots.filter((s) => (pathOf(s)?.attrs.hops ?? []).some((h) => h.startsWith('waiting on inventory /stock/:sku') && h.includes('recomputeStockLevels')));
    t.diagnostic(`hot traces: ${hotTraces.size}; their gateway roots naming recomputeStockLevels on the path: ${named.length} of ${hotRoots.length}`);
    if (hotRoots[0]) t.diagnostic(`e.g. ${JSON.stringify(pathOf(hotRoots[0])?.attrs)}`);
    for (const s of hotRoots.filter((r) => !named.includes(r)).slice(0, 5)) t.diagnostic(`not named: trace ${s.traceId}: ${JSON.stringify(pathOf(s)?.attrs)}`);
    assert.ok(hotRoots.length >= 20, `only ${hotRoots.length} gateway roots of traces where inventory burnt >= 15 ms`);
    assert.ok(named.length >= 0.8 * hotRoots.length, `${named.length} of ${hotRoots.length} name recomputeStockLevels on their path`);
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
});
