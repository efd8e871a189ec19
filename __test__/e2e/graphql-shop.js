'use strict';
// The shape both GraphQL end-to-end tests run (graphql-path.test.js on one node,
// graphql-path-tier.test.js on two nodes through the trace tier): the load a client puts on the
// gateway (gateway.js), and issue 42's checks on the spans read back from Jaeger (jaeger.js).
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const path = require('node:path');
const pipeline = require('../../demo/pipeline');
const { findSpans } = require('./jaeger');

// The agent's flags: 99 Hz (a 15 ms burst is a sample or two), 2 s windows, off-CPU on.
const AGENT_FLAGS = ['--hz', '99', '--interval', '2', '--off-cpu'];
// How long the clients load the gateway: enough for 20 or more traces where inventory burnt
// 15 ms of CPU on a busy 2-vCPU machine.
const LOAD_MS = 20_000;

const INVENTORY_ROUTES = ['/stock/:sku', '/price/:sku'];

const OPERATIONS = [
  { route: 'query ProductPage', body: (n) => ({ query: 'query ProductPage($sku: String!) { product(sku: $sku) { sku stock price } }', variables: { sku: `sku-${1000 + (n % 40)}` } }) },
  { route: 'query Health', body: () => ({ query: 'query Health { health }' }) },
  { route: 'query (anonymous)', body: () => ({ query: '{ health }' }) },
];

/** One client of the gateway on `port`, while `going()`: ProductPage twice as often as each of the others. */
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

/**
 * Inventory (its spans to the Collector at OTLP/HTTP port inventoryTo) and the gateway calling
 * it (to gatewayTo), each pushed on procs: { gateway, inventory }.
 */
async function startServices(procs, gatewayTo, inventoryTo) {
  const inventory = await pipeline.startService(path.join(__dirname, 'inventory.js'), inventoryTo, { OTEL_SERVICE_NAME: 'inventory' });
  procs.push(inventory);
  const gateway = await pipeline.startService(path.join(__dirname, 'gateway.js'), gatewayTo,
    { OTEL_SERVICE_NAME: 'gateway', INVENTORY_URL: `http://127.0.0.1:${inventory.port}` });
  procs.push(gateway);
  return { gateway, inventory };
}

/** Two clients on the gateway for LOAD_MS: { from, to }, the wall-clock ms it ran between. */
async function runLoad(gateway) {
  const from = Date.now();
  let going = true;
  const clients = [client(gateway.port, () => going), client(gateway.port, () => going)];
  await sleep(LOAD_MS);
  going = false;
  await Promise.all(clients);
  return { from, to: Date.now() };
}

const profileOf = (s) => s.events.find((e) => e.name === 'thread_ctx.profile');
const pathOf = (s) => s.events.find((e) => e.name === 'thread_ctx.path');

/**
 * The gateway's traces that started in [from, to], read from Jaeger's query port until the
 * gateway's requests are enriched (spans wait for the agent windows that cover them, then
 * max_wait at most; in the trace tier, then for the rest of their trace): { spans, ofService,
 * roots (the gateway's requests), stock (inventory's /stock/:sku requests) }.
 */
async function readBack(t, queryPort, from, to) {
  let spans = [];
  const ofService = (name) => spans.filter((s) => s.resource['service.name'] === name);
  for (let i = 0; i < 30; i++) {
    await sleep(2_000);
    spans = await findSpans(queryPort, 'gateway', from, to);
    const roots = ofService('gateway').filter((s) => s.server);
    if (roots.length > 0 && roots.filter((s) => profileOf(s)).length >= 0.95 * roots.length && i >= 5) break;
  }
  const roots = ofService('gateway').filter((s) => s.server);
  const stock = ofService('inventory').filter((s) => s.server && s.route === '/stock/:sku');
  t.diagnostic(`gateway: ${roots.length} requests; inventory: ${stock.length} /stock requests`);
  assert.ok(roots.length >= 100, `only ${roots.length} gateway requests in Jaeger`);
  return { spans, ofService, roots, stock };
}

/** No held_by (nor held_by_routes) entry on a gateway span names an inventory route. */
function checkHolders(t, gatewaySpans) {
  const entries = gatewaySpans.flatMap((s) => {
    const ev = profileOf(s);
    return ev ? [...(ev.attrs.held_by ?? []), ...(ev.attrs.held_by_routes ?? [])] : [];
  });
  t.diagnostic(`gateway held_by entries: ${entries.length}`);
  assert.ok(entries.length >= 20, `only ${entries.length} held_by entries on gateway spans: nothing to check`);
  const wrong = entries.filter((e) => INVENTORY_ROUTES.some((r) => e.startsWith(`${r} `)));
  assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} of ${entries.length} gateway held_by entries name an inventory route`);
}

/** At least 90 % of the gateway's requests (its server spans) are routed by their GraphQL operation. */
function checkRouted(t, roots) {
  const routes = new Set(OPERATIONS.map((o) => o.route));
  const routed = roots.filter((s) => routes.has(s.attrs['thread_ctx.route']) && s.attrs['thread_ctx.route.source'] === 'graphql');
  t.diagnostic(`routed by operation: ${routed.length} of ${roots.length}; routes: ${[...new Set(roots.map((s) => s.attrs['thread_ctx.route']))].join(', ')}`);
  assert.ok(routed.length >= 0.9 * roots.length, `${routed.length} of ${roots.length} routed by operation`);
}

/**
 * Where inventory's /stock/:sku request burnt 15 ms or more of its own CPU, at least 80 % of the
 * gateway roots of those traces name recomputeStockLevels on their path; returns those roots.
 */
function checkHotPath(t, roots, stock) {
  const hotTraces = new Set(stock.filter((s) => (s.attrs['thread_ctx.cpu.trace_ms'] ?? 0) >= 15).map((s) => s.traceId));
  const hotRoots = roots.filter((s) => hotTraces.has(s.traceId));
  const named = hotRoots.filter((s) => (pathOf(s)?.attrs.hops ?? []).some((h) => h.startsWith('waiting on inventory /stock/:sku') && h.includes('recomputeStockLevels')));
  t.diagnostic(`hot traces: ${hotTraces.size}; their gateway roots naming recomputeStockLevels on the path: ${named.length} of ${hotRoots.length}`);
  if (hotRoots[0]) t.diagnostic(`e.g. ${JSON.stringify(pathOf(hotRoots[0])?.attrs)}`);
  for (const s of hotRoots.filter((r) => !named.includes(r)).slice(0, 5)) t.diagnostic(`not named: trace ${s.traceId}: ${JSON.stringify(pathOf(s)?.attrs)}`);
  assert.ok(hotRoots.length >= 20, `only ${hotRoots.length} gateway roots of traces where inventory burnt >= 15 ms`);
  assert.ok(named.length >= 0.8 * hotRoots.length, `${named.length} of ${hotRoots.length} name recomputeStockLevels on their path`);
  return hotRoots;
}

module.exports = { AGENT_FLAGS, INVENTORY_ROUTES, OPERATIONS, client, startServices, runLoad, profileOf, pathOf, readBack, checkHolders, checkRouted, checkHotPath };
