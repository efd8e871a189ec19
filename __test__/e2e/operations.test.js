'use strict';
// What an operator meets, end to end with every part real (Jaeger v2, the project's Collector with
// collector/spanprofiles.yaml, `thread-ctx agent` with eBPF, a service wired exactly as the
// README's one-line wiring says, with the real NodeSDK):
// - the agent pointed at something that answers but is not an OTLP receiver (a web page answering
//   200 text/html, Jaeger's query port) reports every window as refused, naming what answered, and
//   never as exported; each of its lines starts with its time (RFC 3339);
// - the service stopped with SIGTERM right after its last request loses none of its spans (the
//   SDK's batch waits up to 5 s before it sends);
// - a bad connector setting given through the environment (SPANPROFILES_MAX_WAIT=abc) stops the
//   Collector with the value quoted.
// Run once per CI run (scripts/test.sh), beside spanprofiles.test.js.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const http = require('node:http');
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const pipeline = require('../../demo/pipeline');

const isRoot = process.getuid() === 0;
const requireEbpf = process.env.REQUIRE_EBPF === '1';
const README = path.join(pipeline.ROOT, 'README.md');

/** The README's one-line wiring: the first js block under "### The one-line wiring". */
function readmeWiring() {
  const text = fs.readFileSync(README, 'utf8');
  const section = text.slice(text.indexOf('### The one-line wiring'));
  const m = /```js\n([\s\S]*?)```/.exec(section);
  assert.ok(m, 'README.md has no js block under "### The one-line wiring"');
  return m[1];
}

/** A service made of the README's wiring and a node:http server: one server span per request. */
function writeReadmeService(dir) {
  const file = path.join(dir, 'readme-service.js');
  fs.writeFileSync(file, `${readmeWiring()}
// -- the test's service, after the README's wiring --
const http = require('node:http');
const { trace, SpanKind } = require('@opentelemetry/api');
const tracer = trace.getTracer('readme-service');
const server = http.createServer((req, res) => {
  tracer.startActiveSpan('GET ' + req.url, { kind: SpanKind.SERVER }, (span) => {
    // 10 ms of CPU per request for the agent to sample (a fixed loop count is ~1 ms on a fast
    // core: too few samples at 99 Hz for every window to hold some).
    let x = 0;
    const until = performance.now() + 10;
    while (performance.now() < until) for (let i = 0; i < 10000; i++) x += Math.sqrt(i);
    res.end(String(x));
    span.end();
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ pid: process.pid, port: server.address().port }) + '\\n'));
`);
  return file;
}

function get(port, route) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: route }, (res) => res.resume().on('end', resolve)).on('error', reject);
  });
}

/** A web server that answers every request with a page: 200, text/html. */
async function startWebPage() {
  const server = http.createServer((req, res) => {
    req.resume().on('end', () => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><html><head><title>Welcome to the shop</title></head><body>hello</body></html>');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${server.address().port}` };
}

const RFC3339 = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) thread-ctx agent: /;

/**
 * The agent for `pid`, sending to `endpoint` over `protocol`, until `windows` status lines say
 * a refusal (loading the service meanwhile, so that windows have samples); then SIGTERM. Returns
 * its lines and exit code. Bounded: 120 s for the refusals.
 */
async function agentAgainst(pid, port, endpoint, protocol, windows = 2) {
  const started = Date.now();
  const child = spawn(pipeline.BIN.threadCtx,
    ['agent', '--pid', String(pid), '--interval', '1s', '--hz', '99', '--endpoint', endpoint, '--protocol', protocol],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT: '' } });
  let text = '';
  child.stderr.on('data', (d) => { text += d; });
  const exited = new Promise((r) => child.once('close', (code) => r(code)));
  // The agent's refusal count is cumulative ("since start"): the highest a window line says.
  const refused = () => Math.max(0, ...text.split('\n').filter((l) => l.includes(': window '))
    .map((l) => Number(/ refused (\d+) /.exec(l)?.[1] ?? 0)));
  const spanSamples = () => /: window .* \d+ CPU samples \([1-9]/.test(text);
  const deadline = Date.now() + 120_000;
  try {
    while ((refused() < windows || !spanSamples()) && Date.now() < deadline && child.exitCode === null) {
      await Promise.all([get(port, '/load'), sleep(50)]);
    }
  } finally {
    child.kill('SIGTERM');
  }
  const code = await Promise.race([exited, sleep(30_000).then(() => 'no exit within 30 s of SIGTERM')]);
  if (code !== 0 && code !== null) child.kill('SIGKILL');
  const lines = text.split('\n').filter((l) => l !== '');
  return { code, lines, started, ended: Date.now(), refusedWindows: refused() };
}

test('operations: a wrong endpoint is refused, and SIGTERM loses no span', {
  skip: !isRoot && !requireEbpf ? 'needs root: thread-ctx agent loads eBPF programs (REQUIRE_EBPF=1 makes this a failure)' : false,
  timeout: 600_000,
}, async (t) => {
  assert.ok(isRoot, 'REQUIRE_EBPF=1 but not root: thread-ctx agent cannot load its eBPF programs');
  const missing = pipeline.missing();
  assert.equal(missing, null, missing);
  const dir = fs.mkdtempSync(path.join(pipeline.ROOT, 'target', 'e2e-operations-'));
  const procs = [];
  let page;
  try {
    const jaeger = await pipeline.startJaeger(dir);
    procs.push(jaeger);
    const collector = await pipeline.startCollector(dir, jaeger.otlpGrpc, '1s');
    procs.push(collector);
    // The SDK's own batch delay (5 s): a shorter one would hide what SIGTERM loses.
    const svc = await pipeline.startService(writeReadmeService(dir), collector.http,
      { OTEL_SERVICE_NAME: 'readme-shop', OTEL_BSP_SCHEDULE_DELAY: '5000' });
    procs.push(svc);
    page = await startWebPage();

    await t.test('an endpoint that is not an OTLP receiver: every window refused, saying what answered', async () => {
      const cases = [
        { what: 'a web page', endpoint: page.url, protocol: 'http/protobuf',
          said: 'the endpoint answered HTTP 200 OK with Content-Type text/html; charset=utf-8 (a page titled "Welcome to the shop"), not an OTLP response' },
        { what: "Jaeger's query port", endpoint: `http://127.0.0.1:${jaeger.queryHttp}`, protocol: 'http/protobuf',
          said: 'the endpoint answered HTTP 200 OK with Content-Type text/html; charset=utf-8 (a page titled' },
      ];
      for (const c of cases) {
        const run = await agentAgainst(svc.pid, svc.port, c.endpoint, c.protocol);
        const all = run.lines.join('\n');
        assert.equal(run.code, 0, `${c.what}: the agent exits 0 on SIGTERM:\n${all}`);
        assert.ok(run.refusedWindows >= 2, `${c.what}: expected 2 exports refused (and a window with samples of spans) within 120 s:\n${all}`);
        const windows = run.lines.filter((l) => l.includes(': window '));
        assert.ok(windows.every((l) => l.includes(' exported 0 requests ')), `${c.what}: nothing counted as exported:\n${all}`);
        assert.ok(windows.some((l) => / \d+ CPU samples \([1-9]/.test(l)), `${c.what}: windows held samples of spans to send:\n${all}`);
        assert.ok(all.includes(`export error: refused, not retried: ${c.said}`), `${c.what}: expected ${JSON.stringify(c.said)} in:\n${all}`);
        const last = run.lines.at(-1);
        assert.match(last, / thread-ctx agent: stopped; exported 0 requests /, `${c.what}: the final line`);
        // Every line: its time first, RFC 3339, within the run.
        for (const l of run.lines) {
          const m = RFC3339.exec(l);
          assert.ok(m, `${c.what}: a line without its RFC 3339 time: ${l}`);
          const at = Date.parse(m[1]);
          assert.ok(at >= run.started - 1000 && at <= run.ended + 1000, `${c.what}: ${m[1]} is not within the run: ${l}`);
        }
      }
    });

    await t.test('a bad connector setting from the environment is quoted by the Collector', () => {
      const r = spawnSync(pipeline.BIN.collector,
        ['--config', path.join(pipeline.ROOT, 'collector', 'spanprofiles.yaml'), '--feature-gates=+service.profilesSupport'],
        { env: { ...process.env, SPANPROFILES_MAX_WAIT: 'abc', OTELCOL_OUTPUT: path.join(dir, 'bad-profiles.pb'),
          OTELCOL_TRACES_OUTPUT: path.join(dir, 'bad-traces.pb'), OTELCOL_METRICS_OUTPUT: path.join(dir, 'bad-metrics.json') },
        encoding: 'utf8', timeout: 60_000 });
      assert.notEqual(r.status, 0, `the Collector refuses to start:\n${r.stderr}`);
      assert.match(r.stderr, /max_wait: invalid duration "abc": expected a number and a unit/, r.stderr);
    });

    await t.test("SIGTERM right after the last request: every span reaches the Collector (the README's wiring)", async () => {
      const N = 40;
      for (let i = 0; i < N; i++) await get(svc.port, '/final');
      svc.child.kill('SIGTERM');
      const code = await Promise.race([svc.exited, sleep(30_000).then(() => 'no exit within 30 s')]);
      procs.splice(procs.indexOf(svc), 1);
      // Spans wait in the connector up to max_wait (1 s here) for profile windows, then leave
      // for the file; read back until all are there or 60 s passed.
      let finals = 0;
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        if (fs.existsSync(collector.files.traces) && fs.statSync(collector.files.traces).size > 0) {
          const out = execFileSync(pipeline.BIN.threadCtx, ['report', '--traces', collector.files.traces, '--json', '--top', '0'], { encoding: 'utf8' });
          finals = JSON.parse(out).routes.find((r) => r.route === 'GET /final')?.requests ?? 0;
          if (finals >= N) break;
        }
        await sleep(500);
      }
      assert.equal(finals, N, `spans of the ${N} requests before SIGTERM that reached the Collector (the service exited ${code})`);
      assert.equal(code, 0, 'the service exits 0 once its SDK has shut down');
    });
  } finally {
    page?.server.close();
    for (const p of procs.reverse()) await pipeline.stop(p);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
