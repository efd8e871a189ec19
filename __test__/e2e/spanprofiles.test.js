'use strict';
// End to end, every part real: a service (service.js: /hog, /wait, /alloc, /block) with NodeSDK's
// OTLP trace exporter to the project's Collector, `thread-ctx agent --off-cpu --alloc` (eBPF) to
// the same Collector, the spanprofiles connector joining them, spanmetrics after it, Jaeger v2
// storing the enriched spans; every figure below is read back from Jaeger's query API.
// Run once per CI run (scripts/test.sh), not per Node version: it tests the join, not Node.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { spawnSync } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const pipeline = require('../../demo/pipeline');
const { findSpans } = require('./jaeger');

const SERVICE = 'e2e-shop';
const SCRIPT = path.join(__dirname, 'service.js');
const isRoot = process.getuid() === 0;
const requireEbpf = process.env.REQUIRE_EBPF === '1';
const HZ = 99;

// The lines of hogCPU in the service: its frame is named at one of them.
const hogLines = (() => {
  const lines = fs.readFileSync(SCRIPT, 'utf8').split('\n');
  const first = lines.findIndex((l) => l.startsWith('function hogCPU')) + 1;
  const last = first + lines.slice(first - 1).findIndex((l) => l === '}');
  return { first, last };
})();
const namesHog = (s) => {
  const m = /^hogCPU \(service\.js:(\d+)\)/.exec(s);
  return m !== null && Number(m[1]) >= hogLines.first && Number(m[1]) <= hogLines.last;
};

// Requests, back to back per client, while `going()`; `pause` ms between two.
async function client(port, route, going, pause = 0) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let n = 0;
  while (going()) {
    await new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port, path: route, agent }, (res) => res.resume().on('end', resolve)).on('error', reject);
    });
    n++;
    if (pause > 0) await sleep(pause);
  }
  agent.destroy();
  return n;
}

// The CPU time the kernel gave process `pid` (utime + stime, in clock ticks of 10 ms).
function cpuSeconds(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const q = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
const median = (xs) => q(xs, 0.5);
const fmt = (x) => (Number.isFinite(x) ? x.toFixed(2) : String(x));
const PARTS = ['thread_ctx.cpu.trace_ms', 'thread_ctx.cpu.other_traces_ms', 'thread_ctx.cpu.no_span_ms',
  'thread_ctx.off_cpu.trace_ms', 'thread_ctx.off_cpu.other_traces_ms', 'thread_ctx.off_cpu.no_span_ms', 'thread_ctx.off_cpu.runnable_ms'];
const sumOfParts = (s) => PARTS.reduce((acc, k) => acc + s.attrs[k], 0);
// CPU figures are counts of samples, one period each: a measured count n against an expected
// count e passes when n >= e - 3 sqrt(e) (Poisson, three standard deviations), so that a few
// samples on a starved machine neither pass nor fail by luck alone.
const PERIOD_MS = 1000 / HZ;
const enoughSamples = (measuredMs, expectedMs) => {
  const e = expectedMs / PERIOD_MS;
  return measuredMs / PERIOD_MS >= e - 3 * Math.sqrt(e);
};
const event = (s) => s.events.find((e) => e.name === 'thread_ctx.profile')?.attrs ?? {};

test('spanprofiles: slow spans explained in Jaeger', {
  skip: !isRoot && !requireEbpf ? 'needs root: thread-ctx agent loads eBPF programs (REQUIRE_EBPF=1 makes this a failure)' : false,
  timeout: 600_000,
}, async (t) => {
  assert.ok(isRoot, 'REQUIRE_EBPF=1 but not root: thread-ctx agent cannot load its eBPF programs');
  const why = pipeline.missing();
  assert.equal(why, null, why);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'spanprofiles-e2e-'));
  const procs = [];
  t.after(async () => {
    for (const p of procs.reverse()) await pipeline.stop(p, 10_000);
    // Kept when the test failed, or when asked (SPANPROFILES_E2E_KEEP=1) to look at them.
    if (!t.passed || process.env.SPANPROFILES_E2E_KEEP === '1') t.diagnostic(`logs and files kept in ${dir}`);
    else fs.rmSync(dir, { recursive: true, force: true });
  });

  const jaeger = await pipeline.startJaeger(dir);
  procs.push(jaeger);
  const collector = await pipeline.startCollector(dir, jaeger.otlpGrpc, '10s');
  procs.push(collector);
  const svc = await pipeline.startService(SCRIPT, collector.http, { OTEL_SERVICE_NAME: SERVICE });
  procs.push(svc);
  const agent = await pipeline.startAgent(svc.pid, collector.grpc, ['--hz', String(HZ), '--interval', '1s', '--off-cpu', '--alloc']);
  procs.push(agent);
  t.diagnostic(`${agent.command}; Collector ${path.relative(pipeline.ROOT, pipeline.BIN.collector)} with collector/spanprofiles.yaml; Jaeger on ${jaeger.queryHttp}`);

  // Warm up (JIT, the SDK's first export), then three phases, their spans told apart by time.
  const until = (ms) => () => Date.now() < ms;
  await Promise.all([client(svc.port, '/hog', until(Date.now() + 1500)), client(svc.port, '/alloc', until(Date.now() + 1500), 50), client(svc.port, '/wait', until(Date.now() + 1500))]);
  const counts = {};
  const add = (route, n) => { counts[route] = (counts[route] ?? 0) + n; };
  const phase = async (going, clients) => {
    const from = Date.now();
    const ns = await Promise.all(clients.map(([route, pause]) => client(svc.port, route, going, pause)));
    clients.forEach(([route], i) => add(route, ns[i]));
    return { from, to: Date.now() };
  };
  // Under load: /hog back to back, six clients of /wait, nothing else to hold the loop. At least 10 s,
  // and on until the service has had 6 s of CPU (a busy machine gives it less per second: the
  // checks below need enough samples of it), 40 s at most.
  const cpuAtStart = cpuSeconds(svc.pid);
  const loadStart = Date.now();
  const underLoad = await phase(() => Date.now() < loadStart + 10_000 || (cpuSeconds(svc.pid) - cpuAtStart < 6 && Date.now() < loadStart + 40_000),
    [['/hog', 0], ...Array(6).fill(['/wait', 0])]);
  t.diagnostic(`under load for ${fmt((underLoad.to - underLoad.from) / 1000)} s; the service had ${fmt(cpuSeconds(svc.pid) - cpuAtStart)} s of CPU`);
  // Blocking: /block every 100 ms, two clients of /wait; /alloc now and then.
  const blocking = await phase(until(Date.now() + 5000), [['/block', 100], ['/wait', 0], ['/wait', 0], ['/alloc', 50]]);
  // Alone: one client of /wait, nothing else.
  const alone = await phase(until(Date.now() + 4000), [['/wait', 0]]);
  const end = Date.now();
  t.diagnostic(`requests: ${JSON.stringify(counts)}`);

  // The agent's last window goes out at SIGTERM; the Collector holds each span until the
  // windows that cover it are in (max_wait 10 s), then Jaeger has it.
  await pipeline.stop(agent);
  procs.splice(procs.indexOf(agent), 1);
  const expected = Object.values(counts).reduce((a, b) => a + b, 0);
  let spans = [];
  for (const deadline = Date.now() + 90_000; Date.now() < deadline; await sleep(1000)) {
    spans = (await findSpans(jaeger.queryHttp, SERVICE, underLoad.from - 1000, end + 1000)).filter((s) => s.route);
    if (spans.length >= expected) break;
  }
  t.diagnostic(`${spans.length} server spans in Jaeger for ${expected} requests`);
  assert.ok(spans.length >= expected * 0.98, `Jaeger has ${spans.length} of the ${expected} requests' spans`);
  const enriched = spans.filter((s) => s.attrs['thread_ctx.samples'] !== undefined);
  t.diagnostic(`enriched: ${enriched.length} of ${spans.length}`);
  assert.ok(enriched.length >= spans.length * 0.95, `only ${enriched.length} of ${spans.length} spans were enriched`);
  const inPhase = (p, route) => enriched.filter((s) => s.route === route && s.startMs >= p.from && s.startMs < p.to);

  // How much of its time a /hog request got a CPU, by the kernel's count (the service's own
  // process.cpuUsage): on a busy machine the service is preempted and CPU samples thin out.
  const hogs = inPhase(underLoad, '/hog');
  const share = Math.min(1, median(hogs.map((s) => s.attrs['e2e.cpu_ms'] / s.durationMs)));
  t.diagnostic(`/hog got the CPU ${fmt(100 * share)} % of its time (median of ${hogs.length} requests, kernel accounting)`);

  await t.test('/wait under load: its slowest 5 % waited for other requests on the loop, and held_by names /hog', () => {
    const waits = inPhase(underLoad, '/wait').sort((a, b) => b.durationMs - a.durationMs);
    const slowest = waits.slice(0, Math.max(5, Math.ceil(waits.length * 0.05)));
    const rows = slowest.map((s) => `${fmt(s.durationMs)} ms: cpu.other_traces ${fmt(s.attrs['thread_ctx.cpu.other_traces_ms'])} ms, off_cpu.other_traces ${fmt(s.attrs['thread_ctx.off_cpu.other_traces_ms'])} ms, held_by ${JSON.stringify(event(s).held_by ?? [])}`);
    t.diagnostic(`slowest ${slowest.length} of ${waits.length} /wait:\n  ${rows.join('\n  ')}`);
    const sum = (xs, f) => xs.reduce((a, x) => a + f(x), 0);
    const total = sum(slowest, (s) => s.durationMs);
    const cpuOther = sum(slowest, (s) => s.attrs['thread_ctx.cpu.other_traces_ms']);
    const held = cpuOther + sum(slowest, (s) => s.attrs['thread_ctx.off_cpu.other_traces_ms']);
    // The /hog requests that held them: the CPU the kernel gave those (a busy machine preempts
    // the service, and the thread is then off CPU with /hog still active, not sampled on CPU).
    const holders = hogs.filter((h) => slowest.some((w) => h.startMs < w.endMs && h.endMs > w.startMs));
    const heldShare = Math.min(1, sum(holders, (h) => h.attrs['e2e.cpu_ms']) / sum(holders, (h) => h.durationMs));
    t.diagnostic(`other requests held them ${fmt(100 * held / total)} % of their time, ${fmt(100 * cpuOther / total)} % on CPU; the ${holders.length} /hog that held them were on CPU ${fmt(100 * heldShare)} % of their time`);
    // Each span's figure is a few samples (±1 period each); their sum is the claim.
    assert.ok(held / total >= 0.5, `other requests held the slowest /wait ${fmt(100 * held / total)} % of their time`);
    // On a quiet machine heldShare is ~1 and this is the claim as stated: >= 50 % of their time.
    assert.ok(enoughSamples(cpuOther, 0.5 * heldShare * total), `cpu.other_traces_ms is ${fmt(100 * cpuOther / total)} % of their time; expected >= 50 % x ${fmt(heldShare)} (the CPU share the /hog that held them got), less 3 sigma of ${fmt(0.5 * heldShare * total / PERIOD_MS)} samples`);
    const naming = slowest.filter((s) => (event(s).held_by ?? []).some((h) => h.startsWith('/hog ') && namesHog(h.slice(h.indexOf(': ') + 2))));
    assert.ok(naming.length >= slowest.length * 0.8, `held_by names /hog and hogCPU (service.js:${hogLines.first}-${hogLines.last}) in ${naming.length} of ${slowest.length}`);
  });

  await t.test('/wait alone: the loop idle, off CPU with no span, most of the time', () => {
    const waits = inPhase(alone, '/wait');
    const ratios = waits.map((s) => s.attrs['thread_ctx.off_cpu.no_span_ms'] / s.durationMs);
    t.diagnostic(`${waits.length} /wait alone: off_cpu.no_span_ms / duration p10 ${fmt(q(ratios, 0.1))}, median ${fmt(median(ratios))}, p90 ${fmt(q(ratios, 0.9))}`);
    assert.ok(waits.length >= 20, `${waits.length} /wait spans alone`);
    assert.ok(median(ratios) >= 0.7, `median off_cpu.no_span_ms is ${fmt(100 * median(ratios))} % of the duration`);
    assert.ok(ratios.filter((r) => r >= 0.7).length >= waits.length * 0.8, 'off_cpu.no_span_ms >= 70 % in at least 80 % of them');
  });

  await t.test('blocking: /block is off CPU in its own trace; the /wait it delays is off CPU in another', () => {
    const blocks = inPhase(blocking, '/block');
    const own = blocks.map((s) => s.attrs['thread_ctx.off_cpu.trace_ms']);
    t.diagnostic(`${blocks.length} /block (30 ms Atomics.wait): off_cpu.trace_ms p10 ${fmt(q(own, 0.1))}, median ${fmt(median(own))}`);
    assert.ok(blocks.length >= 10, `${blocks.length} /block spans`);
    assert.ok(own.filter((ms) => ms >= 25).length >= blocks.length * 0.9, 'off_cpu.trace_ms >= 25 ms in 90 % of /block');
    // The /wait spans that were open through a whole /block.
    const waits = inPhase(blocking, '/wait');
    const delayed = waits.filter((w) => blocks.some((b) => b.startMs >= w.startMs && b.endMs <= w.endMs));
    const got = delayed.filter((w) => w.attrs['thread_ctx.off_cpu.other_traces_ms'] >= 25 && (event(w).held_by ?? []).some((h) => h.startsWith('/block ')));
    t.diagnostic(`${delayed.length} /wait open through a whole /block; ${got.length} with off_cpu.other_traces_ms >= 25 ms and /block in held_by`);
    assert.ok(delayed.length >= 5, `${delayed.length} /wait spans open through a /block`);
    assert.ok(got.length >= delayed.length * 0.8, `${got.length} of ${delayed.length}`);
  });

  await t.test('/hog: its own CPU, its line first in top_frames', () => {
    const own = hogs.reduce((a, s) => a + s.attrs['thread_ctx.cpu.span_ms'], 0);
    const total = hogs.reduce((a, s) => a + s.durationMs, 0);
    const first = hogs.filter((s) => (event(s).top_frames ?? []).length > 0);
    const named = first.filter((s) => namesHog(event(s).top_frames[0]));
    t.diagnostic(`${hogs.length} /hog: cpu.span_ms ${fmt(100 * own / total)} % of their time; hogCPU first in top_frames of ${named.length} of ${first.length} with samples (e.g. ${JSON.stringify(first[0] && event(first[0]).top_frames)})`);
    assert.ok(enoughSamples(own, 0.7 * share * total), `cpu.span_ms is ${fmt(100 * own / total)} % of /hog's time; expected >= 70 % x ${fmt(share)}, less 3 sigma`);
    assert.ok(named.length >= first.length * 0.9, `hogCPU first in ${named.length} of ${first.length}`);
  });

  await t.test('/alloc: allocates at least 3 x what /hog does', () => {
    const allocs = inPhase(blocking, '/alloc');
    const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const a = mean(allocs.map((s) => s.attrs['thread_ctx.alloc_bytes']));
    const h = mean(hogs.map((s) => s.attrs['thread_ctx.alloc_bytes']));
    const named = allocs.filter((s) => (event(s).top_alloc_frames ?? []).some((f) => f.startsWith('allocateRows (service.js:')));
    t.diagnostic(`alloc_bytes mean: /alloc ${fmt(a / 1e6)} MB over ${allocs.length}, /hog ${fmt(h / 1e6)} MB over ${hogs.length}; allocateRows in top_alloc_frames of ${named.length}`);
    assert.ok(a > 0 && a >= 3 * h, `/alloc ${a} bytes, /hog ${h}`);
    assert.ok(named.length >= allocs.filter((s) => s.attrs['thread_ctx.alloc_bytes'] > 0).length * 0.8, 'allocateRows named');
  });

  await t.test('sums: the parts add up to the duration (median within 0.85-1.15 at 99 Hz)', () => {
    const ratios = enriched.map((s) => sumOfParts(s) / s.durationMs);
    // A span's CPU parts are whole sampling periods: the per-span error is about one period.
    const err = enriched.map((s) => PERIOD_MS / s.durationMs);
    t.diagnostic(`sum of parts / duration over ${ratios.length} spans: p5 ${fmt(q(ratios, 0.05))}, p25 ${fmt(q(ratios, 0.25))}, median ${fmt(median(ratios))}, p75 ${fmt(q(ratios, 0.75))}, p95 ${fmt(q(ratios, 0.95))}; one period / duration (a span's sampling error) median ${fmt(median(err))}`);
    for (const route of ['/hog', '/wait', '/alloc', '/block']) {
      const r = enriched.filter((s) => s.route === route).map((s) => sumOfParts(s) / s.durationMs);
      t.diagnostic(`  ${route}: ${r.length} spans, median ${fmt(median(r))}, p5 ${fmt(q(r, 0.05))}, p95 ${fmt(q(r, 0.95))}`);
    }
    assert.ok(median(ratios) >= 0.85 && median(ratios) <= 1.15, `median ${median(ratios)}`);
  });

  await t.test('thread-ctx report --traces reads what the connector wrote, as Jaeger has it', () => {
    const r = spawnSync(pipeline.BIN.threadCtx, ['report', '--traces', collector.files.traces, '--slowest', '5', '--json'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    const routes = Object.fromEntries(report.routes.map((x) => [x.route, x]));
    t.diagnostic(`report --traces: ${report.spans} spans; /wait p50 ${fmt(routes['/wait']?.p50_ms)} ms, p99 ${fmt(routes['/wait']?.p99_ms)} ms; its slowest 1 %: ${JSON.stringify(routes['/wait']?.slowest_1_percent.per_request.held_by)}`);
    for (const route of ['/hog', '/wait', '/alloc', '/block']) assert.ok(routes[route]?.requests > 0, `report --traces has no ${route}`);
    const byId = new Map(enriched.map((s) => [s.traceId, s]));
    const compared = report.slowest.filter((x) => byId.has(x.trace_id));
    assert.ok(compared.length >= 3, `${compared.length} of the report's slowest traces are in Jaeger's answer`);
    for (const x of compared) {
      const s = byId.get(x.trace_id);
      assert.ok(Math.abs(x.duration_ms - s.durationMs) < 0.01, `${x.trace_id}: ${x.duration_ms} ms in the report, ${s.durationMs} in Jaeger`);
      assert.ok(Math.abs(x.explanation.other_requests_cpu_ms - s.attrs['thread_ctx.cpu.other_traces_ms']) < 1e-6, `${x.trace_id}: cpu.other_traces_ms`);
      assert.ok(Math.abs(x.explanation.idle_ms - s.attrs['thread_ctx.off_cpu.no_span_ms']) < 1e-6, `${x.trace_id}: off_cpu.no_span_ms`);
    }
  });

  await t.test('exemplars: spanmetrics histograms lead to enriched traces', async () => {
    // The metrics file: one JSON line per export.
    await sleep(1500);
    const lines = fs.readFileSync(collector.files.metrics, 'utf8').split('\n').filter(Boolean);
    const exemplars = new Set();
    for (const line of lines) {
      for (const rm of JSON.parse(line).resourceMetrics ?? []) {
        for (const sm of rm.scopeMetrics ?? []) {
          for (const m of sm.metrics ?? []) {
            for (const dp of m.histogram?.dataPoints ?? []) for (const e of dp.exemplars ?? []) exemplars.add(e.traceId.toLowerCase());
          }
        }
      }
    }
    const byTrace = new Set(enriched.map((s) => s.traceId));
    const leading = [...exemplars].filter((id) => byTrace.has(id));
    t.diagnostic(`${exemplars.size} exemplar trace ids in ${lines.length} metric exports; ${leading.length} are enriched traces in Jaeger`);
    assert.ok(leading.length >= 10, `${leading.length} exemplars lead to enriched traces`);
  });
});
