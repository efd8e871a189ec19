'use strict';
// The span-profiles pipeline on one host (the demo, and the end-to-end test of __test__/e2e/),
// every part real and on free loopback ports: Jaeger v2
// (target/jaeger/jaeger, memory storage), the project's Collector with collector/spanprofiles.yaml
// (target/otelcol/otelcol-thread-ctx: the spanprofiles and spanmetrics connectors, OTLP to Jaeger),
// an instrumented service whose NodeSDK exports spans to that Collector, and `thread-ctx agent`
// (target/release/thread-ctx) streaming its profiles to the same Collector; and where the
// connector's metrics are read back, Prometheus 3 (target/prometheus/prometheus) taking them and
// spanmetrics' exemplars over OTLP (collector/spanprofiles-prometheus.yaml).
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');

const ROOT = path.join(__dirname, '..');
const BIN = {
  collector: process.env.OTELCOL_BIN || path.join(ROOT, 'target', 'otelcol', 'otelcol-thread-ctx'),
  jaeger: process.env.JAEGER_BIN || path.join(ROOT, 'target', 'jaeger', 'jaeger'),
  threadCtx: process.env.THREAD_CTX_BIN || path.join(ROOT, 'target', 'release', 'thread-ctx'),
  prometheus: process.env.PROMETHEUS_BIN || path.join(ROOT, 'target', 'prometheus', 'prometheus'),
};

/**
 * What is missing to run the pipeline (and `extra` parts of BIN, e.g. 'prometheus'), as a
 * message saying how to get it; null when nothing is.
 */
function missing(...extra) {
  const needed = ['collector', 'jaeger', 'threadCtx', ...extra];
  const absent = needed.map((k) => BIN[k]).filter((p) => !fs.existsSync(p)).map((p) => path.relative(ROOT, p));
  return absent.length === 0 ? null
    : `${absent.join(', ')} missing: run "bash scripts/setup.sh" (it builds the Collector, Jaeger and Prometheus with Go, thread-ctx with cargo)`;
}

// A free loopback port (another process could take it before ours binds it: the starts below
// retry on other ports when that happens).
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer().once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const exitedWithin = (exited, ms) => Promise.race([exited.then(() => true), sleep(ms).then(() => false)]);

/**
 * Starts `bin` (its arguments `args`, or `args(ports)`) with the environment `envOf(ports)` on
 * `count` free ports (or on `fixedPorts`, a restart on the ports its clients know), its output in
 * `dir`, until its log says `ready`; on "address already in use" it tries other ports (3 times).
 */
async function startServer(name, bin, args, dir, count, envOf, ready, fixedPorts = null) {
  for (let attempt = 1; ; attempt++) {
    const ports = fixedPorts ? [...fixedPorts] : [];
    while (ports.length < count) ports.push(await freePort());
    const logPath = path.join(dir, `${name}-${attempt}.log`);
    const log = fs.openSync(logPath, 'w');
    const argv = typeof args === 'function' ? args(ports) : args;
    const child = spawn(bin, argv, { env: { ...process.env, ...envOf(ports) }, stdio: ['ignore', log, log] });
    fs.closeSync(log);
    const exited = new Promise((r) => child.once('exit', r));
    const deadline = Date.now() + 60_000;
    let text = '';
    while (Date.now() < deadline) {
      text = fs.readFileSync(logPath, 'utf8');
      if (ready.test(text)) return { child, exited, ports, logPath };
      if (await exitedWithin(exited, 100)) break;
    }
    child.kill('SIGKILL');
    if (!text.includes('address already in use') || attempt === 3 || fixedPorts) throw new Error(`${name} did not start (log ${logPath}):\n${text.slice(-4000)}`);
  }
}

/** Jaeger: { otlpGrpc, queryHttp } ports. */
async function startJaeger(dir) {
  const s = await startServer('jaeger', BIN.jaeger, ['--config', path.join(ROOT, 'collector', 'jaeger', 'config.yaml')], dir, 3,
    ([otlp, http, grpc]) => ({
      JAEGER_OTLP_GRPC_ENDPOINT: `127.0.0.1:${otlp}`, JAEGER_QUERY_HTTP_ENDPOINT: `127.0.0.1:${http}`, JAEGER_QUERY_GRPC_ENDPOINT: `127.0.0.1:${grpc}`,
    }), /Everything is ready/);
  return { ...s, otlpGrpc: s.ports[0], queryHttp: s.ports[1] };
}

/** Prometheus 3 with collector/prometheus/config.yaml, OTLP receiver and exemplar storage on: { port }. */
async function startPrometheus(dir) {
  const s = await startServer('prometheus', BIN.prometheus, ([port]) => [
    `--config.file=${path.join(ROOT, 'collector', 'prometheus', 'config.yaml')}`, `--web.listen-address=127.0.0.1:${port}`,
    `--storage.tsdb.path=${path.join(dir, 'prometheus-data')}`, '--web.enable-otlp-receiver', '--enable-feature=exemplar-storage',
  ], dir, 1, () => ({}), /Server is ready to receive web requests/);
  return { ...s, port: s.ports[0] };
}

/**
 * The project's Collector with `configs` (files under collector/, or paths; merged in order) and
 * the environment `envOf([grpc, http, telemetry])`; `restart`, a Collector started before, gives
 * its ports. Resolves with { child, exited, grpc, http, telemetry (its own metrics' port), ports }.
 */
async function startCollectorWith(dir, configs, envOf, restart = null) {
  const restarts = restart ? restart.restarts + 1 : 0;
  const args = [...configs.flatMap((c) => ['--config', path.isAbsolute(c) ? c : path.join(ROOT, 'collector', c)]), '--feature-gates=+service.profilesSupport'];
  const s = await startServer(restarts ? `collector-restart${restarts}` : 'collector', BIN.collector, args, dir, 3, envOf, /Everything is ready/, restart?.ports);
  return { ...s, grpc: s.ports[0], http: s.ports[1], telemetry: s.ports[2], restarts };
}

/**
 * The Collector with collector/spanprofiles.yaml, its files in `dir` unless `outputs` names them.
 * `options`: `prometheus: { port, flush }` (also collector/spanprofiles-prometheus.yaml: the
 * connector's metrics, sent every `flush`, and spanmetrics' to that Prometheus), `restart` (a
 * Collector started before: its ports, and its files appended to), `configs` (more configuration
 * files, merged over it in order), `env`.
 * Resolves with { child, exited, grpc, http, telemetry, files, restart }.
 */
async function startCollector(dir, jaegerOtlpPort, maxWait = '10s', outputs = {}, options = {}) {
  // A Prometheus given alone ({ port, flush }, as this argument was before it held options).
  const { prometheus } = options.port !== undefined ? { prometheus: options } : options;
  const files = options.restart?.files ?? { profiles: path.join(dir, 'profiles.pb'), traces: path.join(dir, 'traces.pb'), metrics: path.join(dir, 'metrics.json'), ...outputs };
  if (!options.restart) for (const f of Object.values(files)) fs.rmSync(f, { force: true });
  const configs = ['spanprofiles.yaml', ...(prometheus ? ['spanprofiles-prometheus.yaml'] : []), ...(options.configs ?? [])];
  const s = await startCollectorWith(dir, configs, ([grpc, http, telemetry]) => ({
    OTELCOL_GRPC_ENDPOINT: `127.0.0.1:${grpc}`, OTELCOL_HTTP_ENDPOINT: `127.0.0.1:${http}`, OTELCOL_TELEMETRY_PORT: String(telemetry),
    OTELCOL_OUTPUT: files.profiles, OTELCOL_TRACES_OUTPUT: files.traces, OTELCOL_METRICS_OUTPUT: files.metrics,
    JAEGER_OTLP_GRPC_ENDPOINT: `127.0.0.1:${jaegerOtlpPort}`, SPANPROFILES_MAX_WAIT: maxWait,
    ...(prometheus ? { PROMETHEUS_OTLP_ENDPOINT: `http://127.0.0.1:${prometheus.port}/api/v1/otlp`, SPANPROFILES_METRICS_FLUSH: prometheus.flush ?? '15s' } : {}),
    ...options.env,
  }), options.restart);
  return { ...s, files, restart: { ports: s.ports, files, restarts: s.restarts } };
}

/** The Collector's own metrics (Prometheus text) as { 'name{labels}': value }. */
async function collectorMetrics(collector) {
  const res = await fetch(`http://127.0.0.1:${collector.telemetry}/metrics`);
  if (!res.ok) throw new Error(`the Collector's metrics endpoint answered ${res.status}`);
  const out = {};
  for (const line of (await res.text()).split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) (\S+)/.exec(line);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

/**
 * The service `script`, exporting spans to the Collector's OTLP/HTTP port through NodeSDK's
 * OTLP exporter (chosen by OTEL_TRACES_EXPORTER); resolves with { child, exited, pid, port }.
 * `prefix` runs node under another command (e.g. ['unshare', '--pid', '--fork']: `pid` is then
 * the one the service sees).
 */
function startService(script, collectorHttpPort, env = {}, prefix = []) {
  // Plain node, no profiling flags: the agent names JS frames from V8's own heap.
  const argv = [...prefix, process.execPath, script];
  const child = spawn(argv[0], argv.slice(1), {
    env: {
      ...process.env, PORT: '0', OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${collectorHttpPort}/v1/traces`,
      // Spans leave every 200 ms, so that a test waits little for them.
      OTEL_BSP_SCHEDULE_DELAY: '200', OTEL_METRICS_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none', ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise((r) => child.once('exit', r));
  return new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve({ child, exited, ...JSON.parse(String(d).split('\n')[0]) }));
    exited.then((code) => reject(new Error(`service exited early (${code})`)));
  });
}

/** `thread-ctx agent` for `pid` with `flags`, streaming to the Collector; resolves once it tracks it. */
function startAgent(pid, collectorGrpcPort, flags) {
  const args = ['agent', '--pid', String(pid), ...flags, '--endpoint', `http://127.0.0.1:${collectorGrpcPort}`, '--protocol', 'grpc'];
  const child = spawn(BIN.threadCtx, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const lines = [];
  let pending = '';
  const exited = new Promise((r) => child.once('close', (code) => r(code))); // after its stderr is read
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`thread-ctx agent did not track process ${pid} within 60 s:\n${lines.join('\n')}`));
    }, 60_000);
    child.stderr.on('data', (d) => {
      const parts = (pending + d).split('\n');
      pending = parts.pop();
      lines.push(...parts);
      if (parts.some((l) => l.includes(`tracking process ${pid}`))) {
        clearTimeout(timer);
        resolve({ child, exited, lines, command: `thread-ctx ${args.join(' ')}` });
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`thread-ctx agent exited (${code}): ${[...lines, pending].join('\n').trim()}`));
    });
  });
}

/** SIGTERM, then SIGKILL after `ms`. */
async function stop(proc, ms = 30_000) {
  if (!proc) return;
  proc.child.kill('SIGTERM');
  if (!(await exitedWithin(proc.exited, ms))) {
    proc.child.kill('SIGKILL');
    await proc.exited;
  }
}

/** A PromQL instant query against Prometheus on `port`: its result vector. */
async function promQuery(port, query) {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/query?${new URLSearchParams({ query })}`);
  const body = await res.json();
  if (body.status !== 'success') throw new Error(`Prometheus refused ${query}: ${JSON.stringify(body)}`);
  return body.data.result;
}

/** Prometheus's exemplars of the series `query` selects over the last `seconds`. */
async function promExemplars(port, query, seconds = 3600) {
  const end = Date.now() / 1000;
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/query_exemplars?${new URLSearchParams({ query, start: String(end - seconds), end: String(end) })}`);
  const body = await res.json();
  if (body.status !== 'success') throw new Error(`Prometheus refused exemplars of ${query}: ${JSON.stringify(body)}`);
  return body.data;
}

module.exports = {
  ROOT, BIN, missing, startServer, startJaeger, startPrometheus, startCollectorWith, startCollector, collectorMetrics, startService, startAgent, stop, promQuery, promExemplars,
};
