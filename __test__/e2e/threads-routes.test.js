'use strict';
// End to end, every part real: each span measured on its own thread, routes where the framework
// sets none, and one identity for spans and profiles. Two services, each in a PID namespace of
// its own on one host (`unshare --pid --fork`: both are pid 1 to themselves, with the same host
// name), so that only service.instance.id tells their spans apart: the NestJS fixture (its server
// spans carry no http.route; /report renders in the worker thread 'report-worker') and the
// service of service.js. `thread-ctx agent` (eBPF) samples both, the project's Collector joins,
// Jaeger stores; every figure is read back from Jaeger, and `thread-ctx report --traces` reads the
// Collector's file. One pipeline start for all the checks.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const http = require('node:http');
const { spawn, execFileSync } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const pipeline = require('../../demo/pipeline');
const { findSpans } = require('./jaeger');
const { runDir } = require('./run-dir');

const NEST = path.join(__dirname, 'nest', 'dist', 'main.js');
const SHOP = path.join(__dirname, 'service.js');
const isRoot = process.getuid() === 0;
const requireEbpf = process.env.REQUIRE_EBPF === '1';
const LOAD_MS = 20_000;

async function client(port, paths, going) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  for (let n = 0; going(); n++) {
    const p = paths(n);
    await new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port, path: p, agent }, (res) => res.resume().on('end', resolve)).on('error', reject);
    });
  }
  agent.destroy();
}

// The host's pid of the node that `unshare --fork` (pid `outer`) started.
function hostPidOf(outer) {
  for (let i = 0; i < 100; i++) {
    const children = fs.readFileSync(`/proc/${outer}/task/${outer}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    if (children.length > 0) return Number(children[0]);
    execFileSync('sleep', ['0.05']);
  }
  throw new Error(`unshare (pid ${outer}) started no process`);
}

function startAgent(pids, collectorGrpcPort, dir) {
  const args = ['agent', ...pids.flatMap((p) => ['--pid', String(p)]), '--hz', '99', '--interval', '2',
    '--endpoint', `http://127.0.0.1:${collectorGrpcPort}`, '--protocol', 'grpc'];
  const log = path.join(dir, 'agent.log');
  const child = spawn(pipeline.BIN.threadCtx, args, { stdio: ['ignore', 'ignore', fs.openSync(log, 'w')] });
  const exited = new Promise((r) => child.once('exit', r));
  return (async () => {
    for (let i = 0; i < 600; i++) {
      const text = fs.readFileSync(log, 'utf8');
      if (pids.every((p) => text.includes(`tracking process ${p}`))) return { child, exited };
      await sleep(100);
    }
    child.kill('SIGKILL');
    throw new Error(`thread-ctx agent did not track ${pids.join(', ')}:\n${fs.readFileSync(log, 'utf8')}`);
  })();
}

const event = (s) => s.events.find((e) => e.name === 'thread_ctx.profile');

test('two services in PID namespaces of their own are both enriched; spans are measured on their own threads; Nest requests get routes', {
  skip: !isRoot && !requireEbpf ? 'needs root: PID namespaces (unshare) and the eBPF agent (REQUIRE_EBPF=1 makes this a failure)' : false,
  timeout: 600_000,
}, async (t) => {
  assert.ok(isRoot, 'REQUIRE_EBPF=1 but not root: unshare --pid and thread-ctx agent need root');
  const why = pipeline.missing();
  assert.equal(why, null, why);
  assert.ok(fs.existsSync(NEST), `${path.relative(pipeline.ROOT, NEST)} is not built: run bash scripts/setup.sh`);
  const { dir, procs } = runDir(t, 'threads-routes-e2e');

  const jaeger = await pipeline.startJaeger(dir);
  procs.push(jaeger);
  const collector = await pipeline.startCollector(dir, jaeger.otlpGrpc, '10s');
  procs.push(collector);
  // --kill-child: when unshare is stopped, its service gets SIGTERM (and flushes its spans).
  const unshare = ['unshare', '--pid', '--fork', '--kill-child=SIGTERM'];
  const nest = await pipeline.startService(NEST, collector.http, { OTEL_SERVICE_NAME: 'nest-shop' }, unshare);
  procs.push(nest);
  const shop = await pipeline.startService(SHOP, collector.http, { OTEL_SERVICE_NAME: 'e2e-shop' }, unshare);
  procs.push(shop);
  assert.deepEqual([nest.pid, shop.pid], [1, 1], 'each service is pid 1 in its own PID namespace');
  const nestPid = hostPidOf(nest.child.pid);
  const shopPid = hostPidOf(shop.child.pid);
  const agent = await startAgent([nestPid, shopPid], collector.grpc, dir);
  procs.push(agent);

  const from = Date.now();
  let going = true;
  const clients = [
    client(nest.port, (n) => `/price/sku-${1000 + (n % 50)}?ms=8`, () => going),
    client(nest.port, (n) => `/quote/sku-${2000 + (n % 50)}`, () => going),
    client(nest.port, () => '/report?ms=20', () => going),
    client(shop.port, (n) => (n % 2 ? '/hog' : '/wait'), () => going),
  ];
  await sleep(LOAD_MS);
  going = false;
  await Promise.all(clients);
  const to = Date.now();
  // Spans wait for the windows that cover them (2 s), then max_wait at most.
  await sleep(14_000);

  const nestSpans = await findSpans(jaeger.queryHttp, 'nest-shop', from, to);
  const shopSpans = await findSpans(jaeger.queryHttp, 'e2e-shop', from, to);
  const nestEntries = nestSpans.filter((s) => s.server);
  const shopEntries = shopSpans.filter((s) => s.server);
  t.diagnostic(`nest-shop: ${nestSpans.length} spans, ${nestEntries.length} requests; e2e-shop: ${shopSpans.length} spans, ${shopEntries.length} requests`);

  await t.test('identity: both services, pid 1 on one host, are enriched (service.instance.id tells them apart)', () => {
    for (const [name, entries] of [['nest-shop', nestEntries], ['e2e-shop', shopEntries]]) {
      assert.ok(entries.length >= 50, `${name}: only ${entries.length} requests in Jaeger`);
      const enriched = entries.filter((s) => event(s) !== undefined);
      t.diagnostic(`${name}: ${enriched.length} of ${entries.length} requests enriched`);
      assert.ok(enriched.length >= 0.95 * entries.length, `${name}: ${enriched.length} of ${entries.length} requests enriched`);
      assert.ok(entries.every((s) => typeof s.resource['service.instance.id'] === 'string'), `${name}: spans without service.instance.id`);
    }
    assert.notEqual(nestEntries[0].resource['service.instance.id'], shopEntries[0].resource['service.instance.id']);
  });

  await t.test("threads: /report's server span is measured on the main thread, its worker's span on the worker", () => {
    const reports = nestEntries.filter((s) => s.attrs['url.path'] === '/report' && event(s));
    const renders = nestSpans.filter((s) => s.name === 'render report' && event(s));
    assert.ok(reports.length >= 20 && renders.length >= 20, `${reports.length} /report and ${renders.length} render spans enriched`);
    const onMain = reports.filter((s) => event(s).attrs['thread.id'] === nestPid && event(s).attrs['thread_ctx.thread.source'] === 'thread.id');
    t.diagnostic(`/report on the main thread (host tid ${nestPid}): ${onMain.length} of ${reports.length}`);
    assert.equal(onMain.length, reports.length, 'every /report server span on the main thread, as its thread.id says');
    const workerTids = new Set(renders.map((s) => event(s).attrs['thread.id']));
    assert.equal(workerTids.size, 1, `render spans on one thread: ${[...workerTids]}`);
    const [worker] = workerTids;
    assert.notEqual(worker, nestPid);
    assert.ok(fs.existsSync(`/proc/${nestPid}/task/${worker}`), `thread ${worker} is a thread of the Nest process`);
    assert.ok(renders.every((s) => event(s).attrs['thread_ctx.thread.source'] === 'thread.id'));
    assert.ok(renders.every((s) => s.attrs['thread.id'] !== worker), 'the span says the id the process sees (its PID namespace), the event the host\'s');
    // Measured on the main thread, a render span could never see its own CPU (its samples are
    // the worker's); how many do depends on how much CPU the busy machine gave the worker.
    const rendering = renders.filter((s) => (s.attrs['thread_ctx.cpu.span_ms'] ?? 0) > 0).length;
    t.diagnostic(`render spans that saw their own CPU on the worker: ${rendering} of ${renders.length}`);
    assert.ok(rendering >= 20, `only ${rendering} of ${renders.length} render spans saw their own CPU`);
  });

  await t.test('routes: Nest requests (no http.route) are named by their samples\' route or their templated path, never a raw URL', () => {
    const named = nestEntries.filter((s) => s.attrs['thread_ctx.route'] !== undefined);
    assert.equal(named.length, nestEntries.length, 'every Nest request gets a route');
    for (const s of named) {
      assert.ok(['samples', 'path'].includes(s.attrs['thread_ctx.route.source']), JSON.stringify(s.attrs));
      assert.doesNotMatch(s.attrs['thread_ctx.route'], /sku-\d+/, 'no raw URL');
    }
    const prices = named.filter((s) => s.attrs['url.path'].startsWith('/price/'));
    const bySamples = prices.filter((s) => s.attrs['thread_ctx.route'] === '/price/:sku' && s.attrs['thread_ctx.route.source'] === 'samples');
    t.diagnostic(`/price: ${bySamples.length} of ${prices.length} named /price/:sku by their samples`);
    assert.ok(bySamples.length >= 0.8 * prices.length, `${bySamples.length} of ${prices.length} /price requests named by their samples`);
    const routes = new Set(named.map((s) => s.attrs['thread_ctx.route']));
    assert.ok(routes.size <= 6, `a handful of routes, not one per URL: ${[...routes]}`);
  });

  await t.test('report --traces groups Nest requests by those routes and says where they came from', () => {
    const text = execFileSync(pipeline.BIN.threadCtx, ['report', '--traces', collector.files.traces], { encoding: 'utf8' });
    assert.match(text, /^\/price\/:sku\s+\d+/m, text);
    assert.doesNotMatch(text, /^GET\s+\d+/m, 'no route called just GET');
    assert.match(text, /no http\.route on its spans: the route is the one their samples carried/, text);
  });
});
