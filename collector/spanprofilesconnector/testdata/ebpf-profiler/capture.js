'use strict';
// Records what the OpenTelemetry eBPF profiler sends about a known workload, for the connector's
// tests to replay (ebpf_profiler_test.go): the profiler's OTLP/Profiles requests and the
// service's spans, as a Collector received them.
//
//   EBPF_PROFILER=/path/to/ebpf-profiler EBPF_PROFILER_COMMIT=4905b24... \
//     node collector/spanprofilesconnector/testdata/ebpf-profiler/capture.js
//
// EBPF_PROFILER is a build of open-telemetry/opentelemetry-ebpf-profiler with its thread-context
// reader: pull request #1229, head 4905b24 (split upstream into #1838-#1869). This repository
// holds none of its code; docs/interoperability.md says how the recording here was made and what
// it measured. EBPF_PROFILER_COMMIT and EBPF_PROFILER_CHANGES say what the build is (its commit,
// any local change) and go into capture.json. Run as root (the profiler loads eBPF programs); it
// profiles the whole host.
//
// The parts, all real and on free loopback ports:
// - the project's Collector (target/otelcol/otelcol-thread-ctx) with capture.yaml: every request
//   written as received;
// - the end-to-end test's service (__test__/e2e/service.js: NodeSDK with the one-line wiring,
//   `contextManager: new ThreadContextManager(...)`), exporting its spans to that Collector;
//   /hog burns 20-40 ms of CPU in hogCPU, /wait awaits a 30 ms timer;
// - the profiler, host-wide, sending to that Collector over gRPC every REPORT_INTERVAL;
// - load: HOG_CLIENTS and WAIT_CLIENTS keep-alive clients for LOAD_SECONDS, so that /wait's
//   timers come due while a /hog holds the event loop.
// Then the profiler's requests are cut down to the service's process (filter.go) and both files
// are written gzipped beside this script, with capture.json saying what ran.
//
// The profiler reads tracepoints through tracefs; where it is not mounted, the profiler runs in a
// mount namespace of its own with tracefs mounted there (nothing on the host changes).
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const zlib = require('node:zlib');
const { spawn, execFileSync } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const pipeline = require('../../../../demo/pipeline');

const HERE = __dirname;
const CONNECTOR = path.join(HERE, '..', '..');
const env = (name, fallback) => process.env[name] ?? fallback;
const SETTINGS = {
  profiler: env('EBPF_PROFILER', ''),
  // What the build is, as its builder says (recorded in capture.json).
  profilerCommit: env('EBPF_PROFILER_COMMIT', 'not given'),
  profilerChanges: env('EBPF_PROFILER_CHANGES', 'none'),
  samplesPerSecond: Number(env('SAMPLES_PER_SECOND', '100')),
  reportInterval: env('REPORT_INTERVAL', '2s'),
  loadSeconds: Number(env('LOAD_SECONDS', '20')),
  hogClients: Number(env('HOG_CLIENTS', '2')),
  waitClients: Number(env('WAIT_CLIENTS', '4')),
  out: env('CAPTURE_OUT', HERE),
};

function fail(message) {
  console.error(`capture: ${message}`);
  process.exit(2);
}

/** The profiler, host-wide, sending to the Collector's gRPC port. */
function startProfiler(grpcPort, logPath) {
  const args = ['-collection-agent', `127.0.0.1:${grpcPort}`, '-disable-tls',
    '-samples-per-second', String(SETTINGS.samplesPerSecond), '-reporter-interval', SETTINGS.reportInterval];
  const log = fs.openSync(logPath, 'w');
  const tracefs = fs.existsSync('/sys/kernel/tracing/events') || fs.existsSync('/sys/kernel/debug/tracing/events');
  const child = tracefs
    ? spawn(SETTINGS.profiler, args, { stdio: ['ignore', log, log] })
    : spawn('unshare', ['--mount', 'sh', '-c', 'mount -t tracefs nodev /sys/kernel/tracing && exec "$0" "$@"', SETTINGS.profiler, ...args],
      { stdio: ['ignore', log, log] });
  fs.closeSync(log);
  return { child, exited: new Promise((r) => child.once('exit', r)), args };
}

/** Waits until the profiler's log says it sampled, failing with the log if it exited. */
async function profilerReady(profiler, logPath) {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    const text = fs.readFileSync(logPath, 'utf8');
    if (/Attached sched monitor/.test(text)) return;
    if (profiler.child.exitCode !== null || /level=ERROR/.test(text)) fail(`the profiler did not start:\n${text}`);
    await sleep(200);
  }
  fail(`the profiler did not attach within 120 s:\n${fs.readFileSync(logPath, 'utf8')}`);
}

/** `clients` keep-alive clients asking for `route` until `end`; resolves with the answers. */
async function load(port, route, clients, end) {
  const agent = new http.Agent({ keepAlive: true });
  let answered = 0;
  const client = async () => {
    while (Date.now() < end) {
      await new Promise((resolve) => {
        http.get({ host: '127.0.0.1', port, path: route, agent }, (res) => {
          res.resume();
          res.on('end', resolve);
        }).on('error', resolve);
      });
      answered++;
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  agent.destroy();
  return answered;
}

function gzipTo(from, to) {
  fs.writeFileSync(to, zlib.gzipSync(fs.readFileSync(from), { level: 9 }));
}

async function main() {
  if (!SETTINGS.profiler || !fs.existsSync(SETTINGS.profiler)) {
    fail('EBPF_PROFILER must name a build of the OpenTelemetry eBPF profiler with its thread-context reader (PR #1229)');
  }
  if (process.getuid() !== 0) fail('run as root: the profiler loads eBPF programs');
  const missing = [pipeline.BIN.collector].filter((p) => !fs.existsSync(p));
  if (missing.length) fail(`${missing.join(', ')} missing: run "bash scripts/setup.sh"`);

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ebpf-profiler-capture-'));
  const raw = { profiles: path.join(dir, 'profiles-host.pb'), traces: path.join(dir, 'traces.pb') };
  let collector, service, profiler;
  try {
    collector = await pipeline.startServer('collector', pipeline.BIN.collector,
      ['--config', path.join(HERE, 'capture.yaml'), '--feature-gates=+service.profilesSupport'], dir, 2,
      ([grpc, httpPort]) => ({
        OTELCOL_GRPC_ENDPOINT: `127.0.0.1:${grpc}`, OTELCOL_HTTP_ENDPOINT: `127.0.0.1:${httpPort}`,
        OTELCOL_OUTPUT: raw.profiles, OTELCOL_TRACES_OUTPUT: raw.traces,
      }), /Everything is ready/);
    const [grpcPort, httpPort] = collector.ports;
    service = await pipeline.startService(path.join(pipeline.ROOT, '__test__', 'e2e', 'service.js'), httpPort,
      { OTEL_SERVICE_NAME: 'ebpf-profiler-capture' });
    console.log(`service pid ${service.pid} on port ${service.port}; starting the profiler (log ${dir}/profiler.log)`);
    profiler = startProfiler(grpcPort, path.join(dir, 'profiler.log'));
    await profilerReady(profiler, path.join(dir, 'profiler.log'));
    // The profiler finds a process's mappings and TLS symbol at its first samples of it.
    await load(service.port, '/hog', 1, Date.now() + 3000);

    const started = new Date();
    const loadAverage = os.loadavg()[0];
    const end = Date.now() + SETTINGS.loadSeconds * 1000;
    const [hogs, waits] = await Promise.all([
      load(service.port, '/hog', SETTINGS.hogClients, end),
      load(service.port, '/wait', SETTINGS.waitClients, end),
    ]);
    console.log(`load done: ${hogs} /hog, ${waits} /wait; waiting for the profiler's last reports`);
    // Two report intervals and their jitter: every sample of the load has been sent.
    await sleep(3 * parseFloat(SETTINGS.reportInterval) * 1000);
    await pipeline.stop(service); // its SDK exports the last spans as it shuts down
    await pipeline.stop(profiler);
    await sleep(500);
    await pipeline.stop(collector);

    const profiles = path.join(dir, 'profiles.pb');
    const go = fs.existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : 'go';
    execFileSync(go, ['run', './testdata/ebpf-profiler/filter.go', '-pid', String(service.pid), '-in', raw.profiles, '-out', profiles],
      { cwd: CONNECTOR, stdio: 'inherit' });
    gzipTo(profiles, path.join(SETTINGS.out, 'profiles.pb.gz'));
    gzipTo(raw.traces, path.join(SETTINGS.out, 'spans.pb.gz'));
    const meta = {
      recorded: started.toISOString(),
      profiler: {
        source: 'open-telemetry/opentelemetry-ebpf-profiler pull request #1229',
        commit: SETTINGS.profilerCommit,
        localChanges: SETTINGS.profilerChanges,
        flags: profiler.args.filter((a) => !/^127\.0\.0\.1:/.test(a)),
      },
      service: { script: '__test__/e2e/service.js', pid: service.pid, node: process.version },
      load: { seconds: SETTINGS.loadSeconds, hogClients: SETTINGS.hogClients, waitClients: SETTINGS.waitClients, answered: { '/hog': hogs, '/wait': waits } },
      host: { cpus: os.cpus().length, loadAverage1m: Number(loadAverage.toFixed(2)), kernel: os.release() },
    };
    fs.writeFileSync(path.join(SETTINGS.out, 'capture.json'), `${JSON.stringify(meta, null, 2)}\n`);
    console.log(`written to ${SETTINGS.out}: profiles.pb.gz, spans.pb.gz, capture.json`);
    fs.rmSync(dir, { recursive: true, force: true });
  } finally {
    await pipeline.stop(service);
    await pipeline.stop(profiler);
    await pipeline.stop(collector);
  }
}

main().catch((e) => fail(e.stack || String(e)));
