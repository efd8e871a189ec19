'use strict';
// End to end, the two-node variant of graphql-path.test.js (issue 42, item 3): the GraphQL
// gateway and the inventory service it calls each report to a node Collector of their own
// (collector/node.yaml with collector/to-tier.yaml), each Collector with its own `thread-ctx
// agent` (--pid: each agent samples its node's service only), as two nodes would run them. The
// node Collectors join spans with their own agent's profiles, and their load_balancing
// exporters send each trace, keyed by its id, to the trace tier (collector/tier.yaml:
// groupbytrace, then span_path), which writes the request's path across both services and sends
// it to Jaeger. Read back from Jaeger, the same answers as on one node: no gateway holder named
// by an inventory route, >= 90 % of the gateway's requests routed by operation, >= 80 % of the
// gateway roots of traces where inventory burnt >= 15 ms naming inventory's hot function on
// their path; and one path per root (the tier's). The gateway's node keeps its latency
// histograms (Prometheus), named by operation. The tier's CPU per span and peak memory are
// printed (docs/spanprofiles.md, "Services on different nodes: the trace tier").
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
const pipeline = require('../../demo/pipeline');
const { runDir, cpuSeconds } = require('./run-dir');
const { needs } = require('../helpers/needs');
const { AGENT_FLAGS, OPERATIONS, startServices, runLoad, readBack, checkHolders, checkRouted, checkHotPath } = require('./graphql-shop');

const need = needs(process.getuid() !== 0 && 'thread-ctx agent needs root to load its eBPF programs');
const IDLE_MS = 5_000;

/** A node's Collector as shipped for a tier (node.yaml, to-tier.yaml), its log in dir/name. */
function startNode(dir, name, tier, prometheus) {
  const own = path.join(dir, name);
  fs.mkdirSync(own);
  return pipeline.startCollectorWith(own, ['node.yaml', 'to-tier.yaml'], ([grpc, http, telemetry]) => ({
    OTELCOL_GRPC_ENDPOINT: `127.0.0.1:${grpc}`, OTELCOL_HTTP_ENDPOINT: `127.0.0.1:${http}`, OTELCOL_TELEMETRY_PORT: String(telemetry),
    OTELCOL_HEALTH_ENDPOINT: '127.0.0.1:0', METRICS_BACKEND_ENDPOINT: `http://127.0.0.1:${prometheus.port}/api/v1/otlp`,
    SPANPROFILES_MAX_WAIT: '10s',
    // One tier Collector: its address is what the DNS resolver resolves (a headless Service's
    // name in Kubernetes).
    TIER_HOSTNAME: '127.0.0.1', TIER_PORT: String(tier.grpc), TIER_INSECURE: 'true',
  }));
}

/** The tier Collector (tier.yaml) sending to Jaeger, its log in dir/tier. */
function startTier(dir, jaeger) {
  const own = path.join(dir, 'tier');
  fs.mkdirSync(own);
  return pipeline.startCollectorWith(own, ['tier.yaml'], ([grpc, , telemetry]) => ({
    OTELCOL_GRPC_ENDPOINT: `127.0.0.1:${grpc}`, OTELCOL_TELEMETRY_PORT: String(telemetry), OTELCOL_HEALTH_ENDPOINT: '127.0.0.1:0',
    TRACES_BACKEND_ENDPOINT: `127.0.0.1:${jaeger.otlpGrpc}`, BACKEND_INSECURE: 'true',
    // The agents' windows are 2 s: a node passes a span on within about one window of its end.
    TIER_WAIT: '6s',
  }));
}

/** A process's CPU time (user + system) in ms. */
const cpuMs = (pid) => cpuSeconds(pid) * 1000;

const sum = (metrics, prefix) => Object.entries(metrics).filter(([k]) => k.startsWith(prefix)).reduce((a, [, v]) => a + v, 0);

test('two nodes, one trace tier: the same answers as on one node, the path written in the tier', { skip: need.skip, timeout: 300_000 }, need.guard(async (t) => {
  const why = pipeline.missing();
  assert.equal(why, null, why);
  const { dir, procs } = runDir(t, 'graphql-path-tier-e2e');

  const jaeger = await pipeline.startJaeger(dir);
  procs.push(jaeger);
  const prometheus = await pipeline.startPrometheus(dir);
  procs.push(prometheus);
  const tier = await startTier(dir, jaeger);
  procs.push(tier);
  const nodeA = await startNode(dir, 'node-a', tier, prometheus);
  procs.push(nodeA);
  const nodeB = await startNode(dir, 'node-b', tier, prometheus);
  procs.push(nodeB);
  const { gateway, inventory } = await startServices(procs, nodeA.http, nodeB.http);
  procs.push(await pipeline.startAgent(gateway.pid, nodeA.grpc, AGENT_FLAGS));
  procs.push(await pipeline.startAgent(inventory.pid, nodeB.grpc, AGENT_FLAGS));

  // The tier's CPU with nothing to do (its own metrics, timers, the exporters' idle
  // connections), so that its CPU per span is told apart from what it burns anyway.
  const idleFrom = [cpuMs(tier.child.pid), Date.now()];
  await sleep(IDLE_MS);
  const idlePerS = ((cpuMs(tier.child.pid) - idleFrom[0]) * 1000) / (Date.now() - idleFrom[1]);
  const tierCpuBefore = [cpuMs(tier.child.pid), Date.now()];
  const { from, to } = await runLoad(gateway);
  const { ofService, roots, stock } = await readBack(t, jaeger.queryHttp, from, to);

  await t.test('no gateway held_by names an inventory route', () => checkHolders(t, ofService('gateway')));
  await t.test("at least 90 % of the gateway's requests are routed by their GraphQL operation", () => checkRouted(t, roots));
  await t.test('where inventory burnt 15 ms or more of its own CPU, at least 80 % of the gateway roots name its hot function on their path, written by the tier', () => {
    checkHotPath(t, roots, stock);
    // The gateway's node never saw inventory's spans: a path across both is the tier's, and
    // a root carries one path at most (the tier replaces a node's).
    const twice = roots.filter((s) => s.events.filter((e) => e.name === 'thread_ctx.path').length > 1);
    assert.equal(twice.length, 0, `${twice.length} gateway roots carry more than one path`);
  });

  await t.test("the gateway's node keeps its latency histograms, its requests by their operation", async () => {
    // span_metrics stays on the node (node.yaml, every 15 s to Prometheus): read until its
    // gateway series are in (capped).
    const query = 'count by (thread_ctx_route) (traces_span_metrics_duration_milliseconds_count{job="gateway", span_name="POST"})';
    let routes = [];
    for (let i = 0; i < 15 && routes.length < OPERATIONS.length; i++) {
      routes = (await pipeline.promQuery(prometheus.port, query)).map((r) => r.metric.thread_ctx_route).sort();
      if (routes.length < OPERATIONS.length) await sleep(2_000);
    }
    assert.deepEqual(routes, OPERATIONS.map((o) => o.route).sort());
  });

  await t.test("each node sent its spans to the tier, which held every trace until it passed it on whole", async () => {
    const [a, b, tm] = await Promise.all([nodeA, nodeB, tier].map((c) => pipeline.collectorMetrics(c)));
    const sentA = sum(a, 'otelcol_exporter_sent_spans{exporter="load_balancing"');
    const sentB = sum(b, 'otelcol_exporter_sent_spans{exporter="load_balancing"');
    const accepted = sum(tm, 'otelcol_receiver_accepted_spans');
    const released = sum(tm, 'otelcol_processor_groupbytrace_spans_released');
    const evicted = sum(tm, 'otelcol_processor_groupbytrace_traces_evicted');
    const cpu = cpuMs(tier.child.pid) - tierCpuBefore[0];
    const net = cpu - (idlePerS * (Date.now() - tierCpuBefore[1])) / 1000;
    const hwm = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${tier.child.pid}/status`, 'utf8'))?.[1];
    t.diagnostic(`node A sent ${sentA} spans, node B ${sentB}; the tier took ${accepted}, released ${released}, evicted ${evicted} traces`);
    t.diagnostic(`tier: ${cpu.toFixed(0)} ms of CPU for ${accepted} spans (${((cpu * 1000) / Math.max(accepted, 1)).toFixed(1)} µs per span, the Collector's whole work: receive, group, path, export); `
      + `less its idle ${idlePerS.toFixed(1)} ms/s: ${((net * 1000) / Math.max(accepted, 1)).toFixed(1)} µs per span; peak RSS ${(Number(hwm) / 1024).toFixed(0)} MiB`);
    assert.ok(sentA > 0 && sentB > 0, `node A sent ${sentA} spans, node B ${sentB}`);
    assert.equal(evicted, 0, 'the tier dropped traces past num_traces');
    assert.ok(released > 0, 'the tier released no span');
  });
}));
