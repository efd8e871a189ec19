'use strict';
// End to end, every part real: a service (service.js: /hog, /wait, /alloc, /block, each request's
// work in a handler span inside its server span) with NodeSDK's
// OTLP trace exporter to the project's Collector, `thread-ctx agent --off-cpu --alloc` (eBPF) to
// the same Collector, the spanprofiles connector joining them, spanmetrics after it, Jaeger v2
// storing the enriched spans; every figure below is read back from Jaeger's query API.
// Run once per CI run (scripts/test.sh), not per Node version: it tests the join, not Node.
// The figures are issue 28's, as stated, on wall time: a machine too busy to give the service the
// CPU they assume makes the test load it again, longer, and then fail saying so; never a lower bar.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const pipeline = require('../../demo/pipeline');
const { findSpans } = require('./jaeger');
const { runDir } = require('./run-dir');
const { needs, canRun } = require('../helpers/needs');
const { client } = require('./client');

const SERVICE = 'e2e-shop';
const SCRIPT = path.join(__dirname, 'service.js');
const need = needs(process.getuid() !== 0 && 'thread-ctx agent needs root to load its eBPF programs');
const HZ = 99;
// `thread-ctx` built without its `ebpf` feature (what a laptop without libbpf or clang builds).
const NO_EBPF_BIN = process.env.THREAD_CTX_NO_EBPF_BIN || path.join(pipeline.ROOT, 'target', 'no-ebpf', 'thread-ctx');

// The line of hogCPU's hot loop (1-based): where nearly every sample of a /hog request is, so the
// line its frame must be named at.
const HOG_LOOP_LINE = fs.readFileSync(SCRIPT, 'utf8').split('\n').findIndex((l) => l.includes('acc += Math.sqrt(i)')) + 1;
assert.ok(HOG_LOOP_LINE > 0, 'service.js has no hot loop in hogCPU');
const namesHog = (s) => {
  const m = /^hogCPU \(service\.js:(\d+)\)/.exec(s);
  return m !== null && Number(m[1]) === HOG_LOOP_LINE;
};
// A phase under load counts when the service's main thread ran at least this share of the time it
// was runnable (the rest it waited on a run queue, preempted): the figures checked (/hog on CPU
// >= 70 % of its time, /wait held >= 50 %) assume a service that gets its CPU. A phase below it
// is run again, longer, up to UNDER_LOAD_TRIES times.
const MIN_SHARE = 0.8;
const UNDER_LOAD_TRIES = 3;
// The service and the agent run at the highest priority, so that a shared machine's other work
// (CI's parallel builds) preempts them less; the figures stay the issue's.
const PRIORITY = -20;

// What the scheduler counted for process `pid`'s main thread, where its JS runs: seconds on a CPU,
// and seconds runnable but waiting on a run queue (preempted).
function schedSeconds(pid) {
  const [run, wait] = fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ').map(Number);
  return { run: run / 1e9, wait: wait / 1e9 };
}
const cpuSeconds = (pid) => schedSeconds(pid).run;

// Nice is per thread on Linux (threads made later inherit their maker's): every thread of `pid`.
function setPriorityOfAllThreads(pid, priority) {
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) os.setPriority(Number(tid), priority);
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
const PERIOD_MS = 1000 / HZ;
const sum = (xs, f) => xs.reduce((a, x) => a + f(x), 0);
const event = (s) => s.events.find((e) => e.name === 'thread_ctx.profile')?.attrs ?? {};

test('span_profiles: slow spans explained in Jaeger', { skip: need.skip, timeout: 900_000 }, need.guard(async (t) => {
  // The built binaries: missing, a skip (a failure under REQUIRE_EBPF=1).
  if (!canRun(t, pipeline.missing() ?? false)) return;
  const { dir, procs } = runDir(t, 'spanprofiles-e2e');

  const jaeger = await pipeline.startJaeger(dir);
  procs.push(jaeger);
  const collector = await pipeline.startCollector(dir, jaeger.otlpGrpc, '10s');
  procs.push(collector);
  const svc = await pipeline.startService(SCRIPT, collector.http, { OTEL_SERVICE_NAME: SERVICE });
  procs.push(svc);
  const agent = await pipeline.startAgent(svc.pid, collector.grpc, ['--hz', String(HZ), '--interval', '1s', '--off-cpu', '--alloc']);
  procs.push(agent);
  for (const pid of [svc.pid, agent.child.pid]) setPriorityOfAllThreads(pid, PRIORITY);
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
  // Under load: /hog back to back, six clients of /wait, nothing else to hold the loop. At least
  // 10 s (20 s, 30 s when tried again), and on until the service's main thread has had 6 s of CPU,
  // 40 s at most. A phase whose main thread got under MIN_SHARE of a CPU is tried again.
  const tries = [];
  for (let attempt = 1; attempt <= UNDER_LOAD_TRIES; attempt++) {
    const atStart = schedSeconds(svc.pid);
    const loadStart = Date.now();
    const p = await phase(() => Date.now() < loadStart + 10_000 * attempt || (cpuSeconds(svc.pid) - atStart.run < 6 && Date.now() < loadStart + 40_000),
      [['/hog', 0], ...Array(6).fill(['/wait', 0])]);
    const atEnd = schedSeconds(svc.pid);
    const [ran, waited] = [atEnd.run - atStart.run, atEnd.wait - atStart.wait];
    p.share = ran / (ran + waited);
    tries.push(p);
    t.diagnostic(`under load (try ${attempt}) for ${fmt((p.to - p.from) / 1000)} s; the service's main thread ran ${fmt(ran)} s and waited for a CPU ${fmt(waited)} s: ${fmt(100 * p.share)} % of its runnable time on a CPU`);
    if (p.share >= MIN_SHARE) break;
  }
  const underLoad = tries.reduce((best, p) => (p.share > best.share ? p : best));
  // Why the checks under load cannot be made here, when they cannot.
  const tooBusy = underLoad.share >= MIN_SHARE ? null
    : `the machine is too busy to measure: the service's main thread was on a CPU ${tries.map((p) => `${fmt(100 * p.share)} %`).join(', ')} of the time it was runnable in ${tries.length} phases under load (${tries.map((p) => `${fmt((p.to - p.from) / 1000)} s`).join(', ')}), preempted the rest; the figures checked need >= ${100 * MIN_SHARE} %`;
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
  let all = [];
  let spans = [];
  for (const deadline = Date.now() + 90_000; Date.now() < deadline; await sleep(1000)) {
    all = await findSpans(jaeger.queryHttp, SERVICE, tries[0].from - 1000, end + 1000);
    spans = all.filter((s) => s.route);
    if (spans.length >= expected) break;
  }
  t.diagnostic(`${spans.length} server spans in Jaeger for ${expected} requests`);
  assert.ok(spans.length >= expected * 0.98, `Jaeger has ${spans.length} of the ${expected} requests' spans`);
  const enriched = spans.filter((s) => s.attrs['thread_ctx.samples'] !== undefined);
  t.diagnostic(`enriched: ${enriched.length} of ${spans.length}`);
  assert.ok(enriched.length >= spans.length * 0.95, `only ${enriched.length} of ${spans.length} spans were enriched`);
  const inPhase = (p, route) => enriched.filter((s) => s.route === route && s.startMs >= p.from && s.startMs < p.to);
  // The handler spans (inside the server spans), enriched.
  const handlers = all.filter((s) => s.attrs['e2e.handler'] !== undefined && s.attrs['thread_ctx.samples'] !== undefined);
  const handlersInPhase = (p, route) => handlers.filter((s) => s.attrs['e2e.handler'] === route && s.startMs >= p.from && s.startMs < p.to);

  // How much of its time a /hog request got a CPU, by the kernel's count (the service's own
  // process.cpuUsage around hogCPU): on a busy machine the service is preempted.
  const hogs = inPhase(underLoad, '/hog');
  const hogHandlers = handlersInPhase(underLoad, '/hog');
  t.diagnostic(`/hog got the CPU ${fmt(100 * sum(hogHandlers, (s) => s.attrs['e2e.cpu_ms']) / sum(hogHandlers, (s) => s.durationMs))} % of its handlers' time (${hogHandlers.length} requests, kernel accounting)`);

  await t.test('/wait under load: its slowest 5 % waited for other requests on the loop, and held_by names /hog', () => {
    const waits = inPhase(underLoad, '/wait').sort((a, b) => b.durationMs - a.durationMs);
    assert.ok(waits.length >= 100, `${waits.length} /wait spans under load`);
    const slowest = waits.slice(0, Math.ceil(waits.length * 0.05));
    const rows = slowest.map((s) => `${fmt(s.durationMs)} ms: cpu.other_traces ${fmt(s.attrs['thread_ctx.cpu.other_traces_ms'])} ms, off_cpu.other_traces ${fmt(s.attrs['thread_ctx.off_cpu.other_traces_ms'])} ms, held_by ${JSON.stringify(event(s).held_by ?? [])}`);
    t.diagnostic(`slowest ${slowest.length} of ${waits.length} /wait:\n  ${rows.join('\n  ')}`);
    const total = sum(slowest, (s) => s.durationMs);
    const cpuOther = sum(slowest, (s) => s.attrs['thread_ctx.cpu.other_traces_ms']);
    const held = cpuOther + sum(slowest, (s) => s.attrs['thread_ctx.off_cpu.other_traces_ms']);
    t.diagnostic(`other requests held them ${fmt(100 * held / total)} % of their time, ${fmt(100 * cpuOther / total)} % on CPU`);
    const naming = slowest.filter((s) => (event(s).held_by ?? []).some((h) => h.startsWith('/hog ') && namesHog(h.slice(h.indexOf(': ') + 2))));
    assert.ok(naming.length >= slowest.length * 0.8, `held_by names /hog and hogCPU (service.js:${HOG_LOOP_LINE}) in ${naming.length} of ${slowest.length}`);
    assert.equal(tooBusy, null, tooBusy);
    // Each span's figure is a few samples (±1 period each); their sum is the claim, as issue 28
    // states it: cpu.other_traces_ms >= 50 % of their duration.
    assert.ok(held / total >= 0.5, `other requests held the slowest /wait ${fmt(100 * held / total)} % of their time`);
    assert.ok(cpuOther / total >= 0.5, `cpu.other_traces_ms is ${fmt(100 * cpuOther / total)} % of the slowest /wait's time; expected >= 50 %`);
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

  await t.test('/hog: its handler\'s own CPU, its hot loop\'s line first in top_frames', () => {
    assert.ok(hogHandlers.length >= 100, `${hogHandlers.length} /hog handler spans under load`);
    const own = sum(hogHandlers, (s) => s.attrs['thread_ctx.cpu.span_ms']);
    const total = sum(hogHandlers, (s) => s.durationMs);
    // A 20-40 ms span at 99 Hz has 2-4 samples: one with none is rare, and has no top_frames.
    const first = hogHandlers.filter((s) => (event(s).top_frames ?? []).length > 0);
    const named = first.filter((s) => namesHog(event(s).top_frames[0]));
    t.diagnostic(`${hogHandlers.length} /hog handlers: cpu.span_ms ${fmt(100 * own / total)} % of their time; hogCPU (service.js:${HOG_LOOP_LINE}) first in top_frames of ${named.length} of ${first.length} with samples (e.g. ${JSON.stringify(first[0] && event(first[0]).top_frames)})`);
    assert.ok(first.length >= 50, `only ${first.length} of ${hogHandlers.length} /hog handlers have top_frames`);
    assert.ok(named.length >= first.length * 0.9, `hogCPU at its hot loop (service.js:${HOG_LOOP_LINE}) first in ${named.length} of ${first.length}`);
    // What a preempted service cannot show: its CPU in its spans.
    assert.equal(tooBusy, null, tooBusy);
    assert.ok(first.length >= hogHandlers.length * 0.8, `only ${first.length} of ${hogHandlers.length} /hog handlers have top_frames`);
    assert.ok(own / total >= 0.7, `cpu.span_ms is ${fmt(100 * own / total)} % of /hog's handler time; expected >= 70 %`);
  });

  await t.test('/hog: the server span\'s own CPU is not its trace\'s (the handler span inside it has it)', () => {
    assert.ok(hogs.length >= 100, `${hogs.length} /hog server spans under load`);
    const own = sum(hogs, (s) => s.attrs['thread_ctx.cpu.span_ms']);
    const trace = sum(hogs, (s) => s.attrs['thread_ctx.cpu.trace_ms']);
    const total = sum(hogs, (s) => s.durationMs);
    const sampled = hogs.filter((s) => s.attrs['thread_ctx.cpu.trace_ms'] > 0);
    const less = sampled.filter((s) => s.attrs['thread_ctx.cpu.span_ms'] < s.attrs['thread_ctx.cpu.trace_ms']);
    t.diagnostic(`${hogs.length} /hog server spans: cpu.trace_ms ${fmt(100 * trace / total)} % of their time, cpu.span_ms ${fmt(100 * own / total)} %; span < trace in ${less.length} of ${sampled.length} with samples`);
    assert.ok(sampled.length >= 50, `only ${sampled.length} /hog server spans have CPU samples`);
    assert.ok(own < 0.25 * trace, `cpu.span_ms (${fmt(own)} ms) is not well under cpu.trace_ms (${fmt(trace)} ms): the server span's own code is a small part of its request`);
    assert.ok(less.length >= sampled.length * 0.9, `cpu.span_ms < cpu.trace_ms in only ${less.length} of ${sampled.length}`);
    assert.equal(tooBusy, null, tooBusy);
    assert.ok(trace / total >= 0.7, `cpu.trace_ms is ${fmt(100 * trace / total)} % of /hog's time; expected >= 70 % (the handler's CPU is its trace's)`);
  });

  await t.test('/alloc: allocates at least 3 x what /hog does', () => {
    const allocs = inPhase(blocking, '/alloc');
    const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const a = mean(allocs.map((s) => s.attrs['thread_ctx.alloc_bytes']));
    const h = mean(hogs.map((s) => s.attrs['thread_ctx.alloc_bytes']));
    assert.ok(allocs.length >= 10 && hogs.length >= 10, `${allocs.length} /alloc and ${hogs.length} /hog spans`);
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

  await t.test('thread-ctx built without eBPF: no libbpf in it, and it reports the Collector\'s files as the full build does', (st) => {
    // scripts/test.sh builds it (cargo feature `ebpf` off) into target/no-ebpf/.
    if (!canRun(st, fs.existsSync(NO_EBPF_BIN) ? false : `${NO_EBPF_BIN} is not built: cargo build -p thread-ctx --no-default-features (scripts/test.sh does)`)) return;
    const tree = spawnSync('cargo', ['tree', '--offline', '-p', 'thread-ctx', '--no-default-features', '-e', 'normal,build', '--prefix', 'none'], { cwd: pipeline.ROOT, encoding: 'utf8' });
    assert.equal(tree.status, 0, tree.stderr);
    const crates = new Set(tree.stdout.split('\n').map((l) => l.split(' ')[0]).filter(Boolean));
    assert.ok(crates.has('thread-ctx-otlp') && crates.has('thread-ctx-output'), `cargo tree without eBPF lists ${[...crates].join(' ')}`);
    const bpf = [...crates].filter((c) => /bpf|clang/.test(c));
    assert.deepEqual(bpf, [], `thread-ctx without eBPF still depends on ${bpf.join(', ')}`);
    const help = spawnSync(NO_EBPF_BIN, ['record', '1'], { encoding: 'utf8' });
    assert.equal(help.status, 2, help.stderr);
    assert.match(help.stderr, /record: this thread-ctx was built without eBPF/);
    for (const args of [['report', '--otlp', collector.files.profiles], ['report', '--traces', collector.files.traces, '--slowest', '3', '--json']]) {
      const full = spawnSync(pipeline.BIN.threadCtx, args, { encoding: 'utf8' });
      const lean = spawnSync(NO_EBPF_BIN, args, { encoding: 'utf8' });
      assert.equal(full.status, 0, full.stderr);
      assert.ok(full.stdout.length > 0, `thread-ctx ${args.join(' ')} printed nothing`);
      assert.equal(lean.status, 0, lean.stderr);
      assert.equal(lean.stdout, full.stdout, `thread-ctx ${args[0]} ${args[1]} differs without eBPF`);
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
}));
