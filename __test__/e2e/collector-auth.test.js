'use strict';
// collector/auth.yaml over collector/node.yaml and collector/storage.yaml, as docs/security.md
// tells a user to run it: the project's Collector with a certificate this test makes (openssl)
// and a token file. A real SDK (the OTLP/HTTP-protobuf and gRPC trace exporters from npm, in
// their own Node processes, given the token and the CA by the standard OTEL_EXPORTER_OTLP_*
// variables) gets its spans in; the same SDK without the token, with a wrong one, or without TLS
// is refused and nothing it sent is accepted; a token added to the watched file works at once
// and a removed one is refused (the rotation docs/security.md describes); health_check answers
// the probes. The agent, given the token and the CA by the same variables, has its windows taken
// over gRPC with TLS, and refused without the token.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const crypto = require('node:crypto');
const { spawn, spawnSync } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const pipeline = require('../../demo/pipeline');
const { ADDON, IDS, isRoot } = require('../helpers/addon');
const { needs } = require('../helpers/needs');

const { ROOT, BIN } = pipeline;
// A missing build is a skip, and a failure in CI (REQUIRE_EBPF=1: every built part required).
const built = fs.existsSync(BIN.collector);
const skip = built || process.env.REQUIRE_EBPF === '1' ? false : `${BIN.collector} missing: run "bash scripts/setup.sh"`;

// A CA and a server certificate for 127.0.0.1 signed by it: what a user's PKI (cert-manager,
// their own CA) would hand the Collector.
function makeCerts(dir) {
  const run = (...args) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    assert.equal(r.status, 0, `openssl ${args.join(' ')}: ${r.stderr}`);
  };
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=thread-ctx test CA');
  run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
  fs.writeFileSync(path.join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '1', '-extfile', 'san.ext');
  return { ca: path.join(dir, 'ca.pem'), cert: path.join(dir, 'server.pem'), key: path.join(dir, 'server.key') };
}

// One real SDK process: `n` spans of service `name` exported once by the OTLP trace exporter of
// `protocol` ('http/protobuf' or 'grpc') with the environment `env`; resolves with the export's
// result ({ code: 0 success, 1 failure; error, grpcCode, httpCode }).
function sdkExport(protocol, n, name, env) {
  const pkg = protocol === 'grpc' ? '@opentelemetry/exporter-trace-otlp-grpc' : '@opentelemetry/exporter-trace-otlp-proto';
  const script = `
    const { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base');
    const { resourceFromAttributes } = require('@opentelemetry/resources');
    // The gRPC exporter is not a dependency of this package: sdk-node's own.
    const from = [require.resolve('@opentelemetry/sdk-node')];
    const { OTLPTraceExporter } = require(require.resolve(${JSON.stringify(pkg)}, { paths: [process.cwd(), ...from] }));
    const memory = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': ${JSON.stringify(name)} }), spanProcessors: [new SimpleSpanProcessor(memory)] });
    const tracer = provider.getTracer('auth-test');
    for (let i = 0; i < ${n}; i++) tracer.startSpan('op-' + i).end();
    const exporter = new OTLPTraceExporter();
    exporter.export(memory.getFinishedSpans(), (r) => {
      const e = r.error;
      console.log(JSON.stringify({ code: r.code, error: e ? String(e.message || e) : null, grpcCode: e?.code ?? null, httpCode: e?.code ?? null }));
      exporter.shutdown().finally(() => process.exit(0));
    });`;
  const child = spawn(process.execPath, ['-e', script], {
    cwd: ROOT,
    env: { ...process.env, OTEL_LOG_LEVEL: 'none', OTEL_EXPORTER_OTLP_TIMEOUT: '5000', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve, reject) => child.once('close', (code) => {
    const line = out.split('\n').find((l) => l.startsWith('{'));
    if (!line) reject(new Error(`the SDK process exited ${code} without a result: ${out}${err}`));
    else resolve(JSON.parse(line));
  }));
}

// Spans the Collector's OTLP receivers took (its own metrics), over every transport.
async function accepted(collector) {
  const m = await pipeline.collectorMetrics(collector);
  return Object.entries(m).filter(([k]) => k.startsWith('otelcol_receiver_accepted_spans{')).reduce((s, [, v]) => s + v, 0);
}

// The Collector's counter reaches `want` (it is updated as a request is taken: a short wait).
async function acceptedReaches(collector, want) {
  let got = 0;
  for (let i = 0; i < 50 && got < want; i++) {
    got = await accepted(collector);
    if (got < want) await sleep(100);
  }
  return got;
}

// The project's Collector with node.yaml + storage.yaml + auth.yaml, a certificate and a token
// file made in `dir`, on four free ports: [grpc, http, telemetry, health].
async function startAuthCollector(dir) {
  const certs = makeCerts(dir);
  const tokenFile = path.join(dir, 'tokens');
  const token = crypto.randomBytes(24).toString('hex');
  fs.writeFileSync(tokenFile, `${token} # the node's token\n`, { mode: 0o600 });
  const configs = ['node.yaml', 'storage.yaml', 'auth.yaml'].flatMap((c) => ['--config', path.join(ROOT, 'collector', c)]);
  const s = await pipeline.startServer('collector-auth', BIN.collector, [...configs, '--feature-gates=+service.profilesSupport'], dir, 4,
    ([grpc, http, telemetry, health]) => ({
      TRACES_BACKEND_ENDPOINT: '127.0.0.1:9', METRICS_BACKEND_ENDPOINT: 'http://127.0.0.1:9', BACKEND_INSECURE: 'true',
      OTELCOL_GRPC_ENDPOINT: `127.0.0.1:${grpc}`, OTELCOL_HTTP_ENDPOINT: `127.0.0.1:${http}`, OTELCOL_TELEMETRY_PORT: String(telemetry),
      OTELCOL_HEALTH_ENDPOINT: `127.0.0.1:${health}`, OTELCOL_STORAGE_DIR: path.join(dir, 'storage'),
      OTELCOL_TLS_CERT_FILE: certs.cert, OTELCOL_TLS_KEY_FILE: certs.key, OTELCOL_TOKEN_FILE: tokenFile,
    }), /Everything is ready/);
  return { collector: { ...s, telemetry: s.ports[2] }, certs, tokenFile, token };
}

test('TLS and a token on the receivers: the SDK gets in with them, and not without', { skip, timeout: 90_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'collector-auth-'));
  let collector = null;
  let certs;
  let tokenFile;
  let token;
  t.after(async () => {
    await pipeline.stop(collector, 10_000);
    if (t.passed) fs.rmSync(dir, { recursive: true, force: true });
  });
  ({ collector, certs, tokenFile, token } = await startAuthCollector(dir));
  const [grpc, http, , health] = collector.ports;

  const probe = await fetch(`http://127.0.0.1:${health}/`);
  assert.equal(probe.status, 200, 'health_check answers the probes');

  const https = { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `https://127.0.0.1:${http}/v1/traces`, OTEL_EXPORTER_OTLP_CERTIFICATE: certs.ca };
  const grpcs = { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `https://127.0.0.1:${grpc}`, OTEL_EXPORTER_OTLP_CERTIFICATE: certs.ca };
  const bearer = (tok) => ({ OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer%20${tok}` });

  // Refused first, so that any span they got in would show in the count the accepted ones make.
  const refused = {
    'HTTP, no token': await sdkExport('http/protobuf', 7, 'intruder', https),
    'HTTP, a wrong token': await sdkExport('http/protobuf', 7, 'intruder', { ...https, ...bearer('not-the-token') }),
    'HTTP, the token without TLS': await sdkExport('http/protobuf', 7, 'intruder',
      { ...bearer(token), OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${http}/v1/traces` }),
    'gRPC, no token': await sdkExport('grpc', 7, 'intruder', grpcs),
    'gRPC, the token without TLS': await sdkExport('grpc', 7, 'intruder', { ...bearer(token), OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${grpc}` }),
  };
  for (const [what, r] of Object.entries(refused)) assert.equal(r.code, 1, `${what}: refused, got ${JSON.stringify(r)}`);
  assert.equal(refused['HTTP, no token'].httpCode, 401, JSON.stringify(refused['HTTP, no token']));
  assert.equal(refused['gRPC, no token'].grpcCode, 16, `UNAUTHENTICATED: ${JSON.stringify(refused['gRPC, no token'])}`);
  assert.equal(await accepted(collector), 0, 'no refused span was accepted');

  // The SDK with the token and the CA: every span in, over both protocols.
  const ok = await sdkExport('http/protobuf', 11, 'svc', { ...https, ...bearer(token) });
  assert.equal(ok.code, 0, `HTTP with the token: ${JSON.stringify(ok)}`);
  const okGrpc = await sdkExport('grpc', 13, 'svc', { ...grpcs, ...bearer(token) });
  assert.equal(okGrpc.code, 0, `gRPC with the token: ${JSON.stringify(okGrpc)}`);
  assert.equal(await acceptedReaches(collector, 24), 24, 'the 11 + 13 spans sent with the token');

  // Rotation: a second token added to the watched file works without a restart; once the old one
  // is removed it is refused.
  const next = crypto.randomBytes(24).toString('hex');
  fs.writeFileSync(tokenFile, `${token}\n${next}\n`);
  let rotated = null;
  for (let i = 0; i < 50 && rotated?.code !== 0; i++) {
    if (i) await sleep(200);
    rotated = await sdkExport('http/protobuf', 1, 'svc', { ...https, ...bearer(next) });
  }
  assert.equal(rotated.code, 0, `the added token, taken without a restart: ${JSON.stringify(rotated)}`);
  fs.writeFileSync(tokenFile, `${next}\n`);
  let old = null;
  for (let i = 0; i < 50 && old?.code !== 1; i++) {
    if (i) await sleep(200);
    old = await sdkExport('http/protobuf', 1, 'svc', { ...https, ...bearer(token) });
  }
  assert.equal(old.httpCode, 401, `the removed token, refused: ${JSON.stringify(old)}`);
});

// The local TCP ports process `pid` listens on (its socket inodes in /proc/net/tcp{,6}, state 0A).
function listeningSockets(pid) {
  const inodes = new Set();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    let link = '';
    try {
      link = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue; // closed since the listing
    }
    const m = /^socket:\[(\d+)\]$/.exec(link);
    if (m) inodes.add(m[1]);
  }
  return ['tcp', 'tcp6'].flatMap((f) => fs.readFileSync(`/proc/net/${f}`, 'utf8').split('\n').slice(1))
    .map((l) => l.trim().split(/\s+/)).filter((c) => c[3] === '0A' && inodes.has(c[9])).map((c) => c[1]);
}

// `thread-ctx agent` as docs/security.md sets it up for such a Collector: gRPC over TLS, the CA
// in OTEL_EXPORTER_OTLP_CERTIFICATE, the token in OTEL_EXPORTER_OTLP_HEADERS. With the token every
// window is taken; without it every request is refused (the agent's own counters, its last line).
const agentNeed = needs(!isRoot ? 'the agent needs root (eBPF)' : !fs.existsSync(BIN.threadCtx) && `${BIN.threadCtx} missing: run "bash scripts/setup.sh"`);
test('the agent sends over TLS with the token, and is refused without it', { skip: skip || agentNeed.skip, timeout: 90_000 }, agentNeed.guard(async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'collector-auth-agent-'));
  let collector = null;
  let service = null;
  t.after(async () => {
    service?.kill('SIGKILL');
    await pipeline.stop(collector, 10_000);
    if (t.passed) fs.rmSync(dir, { recursive: true, force: true });
  });
  let token;
  let certs;
  ({ collector, token, certs } = await startAuthCollector(dir));
  const grpc = collector.ports[0];
  // A service that publishes a span and burns CPU inside it.
  service = spawn(process.execPath, ['-e', `require(${JSON.stringify(ADDON)}).setSpanContext('${IDS.traceA}', '${IDS.spanA}', 1);
    console.log('ready'); let x = 0; for (;;) for (let i = 0; i < 1e6; i++) x += Math.sqrt(i);`], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve, reject) => {
    service.stdout.once('data', resolve);
    service.once('exit', (code) => reject(new Error(`the service exited (${code}) before it was ready`)));
  });
  // The agent's run; halfway through, the TCP sockets it listens on (none: it only sends).
  const agent = async (headers) => {
    const child = spawn(BIN.threadCtx, ['agent', '--pid', String(service.pid), '--interval', '1s', '--duration', '3500ms',
      '--endpoint', `https://127.0.0.1:${grpc}`, '--protocol', 'grpc'],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, OTEL_EXPORTER_OTLP_HEADERS: headers, OTEL_EXPORTER_OTLP_CERTIFICATE: certs.ca } });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    const status = new Promise((resolve) => child.once('close', resolve));
    await sleep(2000);
    const listening = listeningSockets(child.pid);
    const code = await status;
    const last = stderr.trim().split('\n').filter((l) => l.includes(' exported ')).pop() ?? '';
    const n = (re) => Number((re.exec(last) ?? [])[1]);
    return { status: code, listening, exported: n(/exported (\d+) requests/), refused: n(/refused (\d+)/), log: stderr.slice(-3000) };
  };
  const withToken = await agent(`Authorization=Bearer%20${token}`);
  assert.equal(withToken.status, 0, withToken.log);
  assert.deepEqual(withToken.listening, [], 'the agent listens on no port');
  assert.ok(withToken.exported >= 2 && withToken.refused === 0, `with the token, every window taken: ${withToken.log}`);
  const without = await agent('');
  assert.ok(without.exported === 0 && without.refused >= 2, `without the token, every window refused: ${without.log}`);
}));
