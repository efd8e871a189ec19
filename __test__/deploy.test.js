'use strict';
// The deployment files (deploy/) against the release they deploy, as far as this machine can go
// without a container engine or systemd as init: the agent tarball that scripts/release.sh writes,
// install.sh run from it (into a staging root) and the unit it installs checked by
// systemd-analyze and run as systemd would; the Dockerfile's build simulated step by step (each
// file it adds exists in the build context, the binary it copies is where ADD unpacks it, the
// base image's glibc runs it, the entrypoint runs the agent); the DaemonSet read as Kubernetes
// would. And, as root, the capabilities the unit and the DaemonSet grant are enough to profile a
// service run by another user from a directory only that user can read, each one needed.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync, execFileSync, spawn } = require('node:child_process');
const YAML = require('yaml');
const { ROOT, ADDON, IDS, isRoot } = require('./helpers/addon');
const { canRun } = require('./helpers/needs');
const { pkg, release } = require('./helpers/release');
const { envFile, shippedAgentArgs, flagValue } = require('./helpers/shipped-agent');

const DEPLOY = path.join(ROOT, 'deploy');
const AGENT_DIR = `thread-ctx-agent-${pkg.version}`;
const UNIT = 'thread-ctx-agent.service';
// glibc of the base images the Dockerfile may name (the binary's newest GLIBC_ symbol must fit).
const BASE_IMAGE_GLIBC = { 'debian:bookworm-slim': '2.36', 'debian:bookworm': '2.36', 'debian:trixie-slim': '2.41' };

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'thread-ctx-deploy-'));
test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

function sh(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 120_000, ...options });
  return { ...r, shown: `${cmd} ${args.join(' ')} exited ${r.status}${r.error ? ` (${r.error.message})` : ''}\n${r.stdout}\n${r.stderr}` };
}

// Whether `what` can run here (root, for eBPF); else the test is skipped, or fails under REQUIRE_EBPF=1.
function needsRoot(t, what) {
  return canRun(t, isRoot ? false : `${what} needs root (eBPF)`);
}

let unpacked;
/** The agent tarball unpacked once: its directory. */
function agentTarball() {
  if (unpacked) return unpacked;
  const dir = path.join(tmp, 'unpacked');
  fs.mkdirSync(dir);
  execFileSync('tar', ['-xzf', release().agent, '-C', dir]);
  unpacked = path.join(dir, AGENT_DIR);
  return unpacked;
}

/** The unit's `Key=value` lines of one section, as { key: [values] }. */
function unitSection(text, section) {
  const out = {};
  let current = null;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) { current = header[1]; continue; }
    const eq = line.indexOf('=');
    if (current === section && eq > 0) (out[line.slice(0, eq)] ??= []).push(line.slice(eq + 1));
  }
  return out;
}

const unitText = () => fs.readFileSync(path.join(DEPLOY, 'systemd', UNIT), 'utf8');
// CAP_BPF CAP_PERFMON ... of the unit's bounding set, as Kubernetes names them (BPF, PERFMON, ...).
const unitCapabilities = () => unitSection(unitText(), 'Service').CapabilityBoundingSet.join(' ').split(/\s+/).map((c) => c.replace(/^CAP_/, '')).sort();
const daemonSet = () => YAML.parse(fs.readFileSync(path.join(DEPLOY, 'kubernetes', 'daemonset.yaml'), 'utf8'));

test('the agent tarball holds thread-ctx, its systemd unit, settings and installer, and nothing else', { timeout: 900_000 }, () => {
  const listed = execFileSync('tar', ['-tvzf', release().agent], { encoding: 'utf8' }).trim().split('\n');
  const files = listed.map((l) => l.split(/\s+/).pop()).sort();
  assert.deepEqual(files, [`${AGENT_DIR}/`, ...['agent.env', 'install.sh', 'thread-ctx', UNIT].map((f) => `${AGENT_DIR}/${f}`)]);
  for (const l of listed) assert.match(l, /^\S+ 0\/0 /, `owned by root in the tarball: ${l}`);
  const dir = agentTarball();
  for (const f of ['install.sh', 'thread-ctx']) assert.ok(fs.statSync(path.join(dir, f)).mode & 0o111, `${f} is executable`);
  assert.equal(execFileSync(path.join(dir, 'thread-ctx'), ['--version'], { encoding: 'utf8' }).trim(), `thread-ctx ${pkg.version}`);
});

test('install.sh installs the binary, the unit and its settings; the unit verifies and runs the agent; settings survive a reinstall', { timeout: 900_000 }, async (t) => {
  const dir = agentTarball();
  const root = path.join(tmp, 'root');
  fs.mkdirSync(root);
  const install = (...args) => sh(path.join(dir, 'install.sh'), ['--root', root, ...args]);
  let r = install('--endpoint', 'http://collector.example:4317', '--protocol', 'grpc');
  assert.equal(r.status, 0, r.shown);
  const bin = path.join(root, 'usr/local/bin/thread-ctx');
  const unit = path.join(root, 'etc/systemd/system', UNIT);
  const env = path.join(root, 'etc/thread-ctx/agent.env');
  assert.equal(fs.statSync(bin).mode & 0o777, 0o755);
  assert.equal(fs.statSync(unit).mode & 0o777, 0o644);
  assert.equal(fs.readFileSync(unit, 'utf8'), unitText(), 'the unit as the repository has it');
  assert.deepEqual(fs.readFileSync(bin), fs.readFileSync(path.join(dir, 'thread-ctx')));
  const settings = envFile(fs.readFileSync(env, 'utf8'));
  assert.equal(settings.OTEL_EXPORTER_OTLP_ENDPOINT, 'http://collector.example:4317');
  assert.equal(settings.OTEL_EXPORTER_OTLP_PROTOCOL, 'grpc');

  // The unit names what install.sh installed, reads the settings it wrote, and verifies.
  const service = unitSection(fs.readFileSync(unit, 'utf8'), 'Service');
  const [exe, ...execArgs] = service.ExecStart[0].split(/\s+/);
  assert.equal(exe, '/usr/local/bin/thread-ctx');
  assert.deepEqual(service.EnvironmentFile, ['/etc/thread-ctx/agent.env']);
  const staged = path.join(tmp, 'verify', UNIT);
  fs.mkdirSync(path.dirname(staged));
  fs.writeFileSync(staged, fs.readFileSync(unit, 'utf8').replace('/usr/local/bin/thread-ctx', bin));
  r = sh('systemd-analyze', ['verify', staged]);
  assert.equal(r.status, 0, r.shown);
  assert.equal(r.stderr, '', `systemd-analyze verify has no complaint: ${r.stderr}`);

  // A user's edit of the settings survives a reinstall; only the flags given are written.
  fs.appendFileSync(env, 'OTEL_EXPORTER_OTLP_HEADERS=x-tenant=shop\n');
  r = install('--endpoint', 'http://other.example:4318', '--protocol', 'http/protobuf');
  assert.equal(r.status, 0, r.shown);
  const again = envFile(fs.readFileSync(env, 'utf8'));
  assert.equal(again.OTEL_EXPORTER_OTLP_HEADERS, 'x-tenant=shop');
  assert.equal(again.OTEL_EXPORTER_OTLP_ENDPOINT, 'http://other.example:4318');
  assert.equal(again.OTEL_EXPORTER_OTLP_PROTOCOL, 'http/protobuf');
  r = install('--protocol', 'http/json');
  assert.equal(r.status, 2, r.shown);
  assert.match(r.stderr, /--protocol: expected grpc or http\/protobuf, got 'http\/json'/);

  if (needsRoot(t, 'running the installed agent')) {
    // As systemd would start it: the settings as the environment, $THREAD_CTX_AGENT_ARGS split
    // into words. Profiles go to a directory here instead of the settings' Collector.
    const words = execArgs.flatMap((a) => (a === '$THREAD_CTX_AGENT_ARGS' ? again.THREAD_CTX_AGENT_ARGS.split(/\s+/) : [a]));
    const pprof = path.join(tmp, 'pprof');
    fs.mkdirSync(pprof);
    const run = sh(bin, [...words, '--duration', '2s', '--pprof-dir', pprof], {
      env: { PATH: process.env.PATH, ...again, OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_PROTOCOL: '' },
    });
    assert.equal(run.status, 0, run.shown);
    assert.match(run.stderr, new RegExp(`thread-ctx agent: sampling every process that publishes span context at ${flagValue(words, '--hz')} Hz, 10s windows`));
  }

  r = install('--uninstall');
  assert.equal(r.status, 0, r.shown);
  assert.ok(!fs.existsSync(bin) && !fs.existsSync(unit), 'binary and unit removed');
  assert.ok(fs.existsSync(env), 'the settings are kept');
});

test('deploy/Dockerfile builds from the release: its inputs exist, the binary lands where it copies from and runs there', { timeout: 900_000 }, async (t) => {
  const text = fs.readFileSync(path.join(DEPLOY, 'Dockerfile'), 'utf8');
  const lines = text.split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('#'))
    .join('\n').replace(/\\\n\s*/g, ' ').split('\n');
  const args = {};
  let stage = null;
  const stages = {}; // name -> { from, root }
  const context = path.dirname(release().agent);
  let entrypoint;
  let cmd;
  let copied;
  const expand = (s) => s.replace(/\$\{(\w+)\}/g, (_, name) => {
    assert.ok(name in args, `\${${name}} is used before an ARG declares it`);
    return args[name];
  });
  for (const line of lines) {
    const [instruction, ...rest] = line.trim().split(/\s+/);
    const operand = rest.join(' ');
    switch (instruction) {
      case 'ARG': {
        const [name, value] = operand.split('=');
        if (value !== undefined) args[name] = value;
        break;
      }
      case 'FROM': {
        const [image, , name] = rest;
        stage = { from: image, root: path.join(tmp, 'image', name ?? 'final') };
        fs.mkdirSync(stage.root, { recursive: true });
        stages[name ?? 'final'] = stage;
        break;
      }
      case 'ADD': {
        const [src, dest] = rest.map(expand);
        const file = path.join(context, src);
        assert.ok(fs.existsSync(file), `ADD ${src}: not in the build context ${context} (scripts/release.sh writes it)`);
        assert.match(src, /\.tar\.gz$/, 'ADD unpacks a local tarball');
        const into = path.join(stage.root, dest);
        fs.mkdirSync(into, { recursive: true });
        execFileSync('tar', ['-xzf', file, '-C', into]);
        break;
      }
      case 'COPY': {
        const from = /^--from=(\S+)$/.exec(rest[0]);
        assert.ok(from, `COPY ${operand}: only copies from a build stage (the build context holds only the release)`);
        const [src, dest] = rest.slice(1).map(expand);
        const source = path.join(stages[from[1]].root, src);
        assert.ok(fs.existsSync(source), `COPY --from=${from[1]} ${src}: the stage has no such file`);
        copied = { dest, into: path.join(stage.root, dest) };
        fs.mkdirSync(path.dirname(copied.into), { recursive: true });
        fs.copyFileSync(source, copied.into);
        fs.chmodSync(copied.into, fs.statSync(source).mode);
        break;
      }
      case 'ENTRYPOINT': entrypoint = JSON.parse(operand); break;
      case 'CMD': cmd = JSON.parse(operand); break;
      default: break;
    }
  }
  assert.equal(args.VERSION, pkg.version, 'the Dockerfile builds the version package.json has');
  assert.deepEqual(entrypoint, [copied.dest], 'the entrypoint is the binary the last COPY put there');
  assert.deepEqual(cmd, ['agent', ...shippedAgentArgs().systemd], 'the image runs the agent with the shipped flags (deploy/systemd/agent.env)');
  const glibc = BASE_IMAGE_GLIBC[stage.from];
  assert.ok(glibc, `the final image ${stage.from}: add its glibc version to BASE_IMAGE_GLIBC`);
  const needed = execFileSync('objdump', ['-T', copied.into], { encoding: 'utf8' }).match(/GLIBC_[0-9.]+/g)
    .map((v) => v.slice(6)).sort((a, b) => a.localeCompare(b, undefined, { numeric: true })).pop();
  assert.ok(needed.localeCompare(glibc, undefined, { numeric: true }) <= 0, `the binary needs glibc ${needed}, ${stage.from} has ${glibc}`);
  const libs = execFileSync('readelf', ['-d', copied.into], { encoding: 'utf8' }).match(/\[lib[^\]]+\]/g);
  for (const lib of libs) assert.match(lib, /^\[(libc|libm|libgcc_s|ld-linux-x86-64)\.so/, `only glibc's libraries: ${lib}`);

  if (needsRoot(t, "running the image's entrypoint (the agent)")) {
    const pprof = path.join(tmp, 'image-pprof');
    fs.mkdirSync(pprof);
    const run = sh(copied.into, [...cmd, '--duration', '2s', '--pprof-dir', pprof], { env: { PATH: '/nonexistent' } });
    assert.equal(run.status, 0, run.shown);
    assert.match(run.stderr, /thread-ctx agent: sampling every process that publishes span context/);
  }
});

test('the DaemonSet runs that image in the host PID namespace, read-only, with the unit\'s capabilities and the standard exporter variables', () => {
  const ds = daemonSet();
  assert.equal(ds.kind, 'DaemonSet');
  const pod = ds.spec.template.spec;
  assert.deepEqual(ds.spec.selector.matchLabels, ds.spec.template.metadata.labels, 'the selector matches the pods');
  assert.equal(pod.hostPID, true);
  const [agent] = pod.containers;
  assert.equal(agent.image.split(':').pop(), pkg.version, 'the image tag is the release deploy/Dockerfile builds');
  assert.equal(agent.args[0], 'agent');
  const sc = agent.securityContext;
  assert.equal(sc.readOnlyRootFilesystem, true);
  assert.equal(sc.allowPrivilegeEscalation, false);
  assert.notEqual(sc.privileged, true);
  assert.deepEqual(sc.capabilities.drop, ['ALL']);
  assert.deepEqual([...sc.capabilities.add].sort(), unitCapabilities(), 'the same capabilities as the systemd unit');
  for (const m of agent.volumeMounts ?? []) assert.equal(m.readOnly, true, `volume ${m.name} is mounted read-only`);
  const env = Object.fromEntries(agent.env.map((e) => [e.name, e.value]));
  const port = { grpc: '4317', 'http/protobuf': '4318' }[env.OTEL_EXPORTER_OTLP_PROTOCOL];
  assert.ok(port, `OTEL_EXPORTER_OTLP_PROTOCOL: ${env.OTEL_EXPORTER_OTLP_PROTOCOL}`);
  assert.match(env.OTEL_EXPORTER_OTLP_ENDPOINT, new RegExp(`^http://\\$\\(NODE_IP\\):${port}$`), 'the endpoint\'s port fits the protocol');
  assert.ok(agent.env.some((e) => e.name === 'NODE_IP' && e.valueFrom.fieldRef.fieldPath === 'status.hostIP'), 'NODE_IP from the downward API');
  assert.ok(pod.terminationGracePeriodSeconds >= 10, 'time for the last window (up to 5 s)');
});

test('the capabilities granted are enough, and each is needed: a service of another user, in a directory only it can read', { timeout: 120_000 }, async (t) => {
  if (!needsRoot(t, 'loading the BPF programs with a reduced capability set')) return;
  const reader = path.join(ROOT, 'target', 'release', 'thread-ctx');
  assert.ok(fs.existsSync(reader), `${reader} is not built`);
  // The service: the addon alone, in a 0700 directory of uid 65534, burning CPU inside a span.
  const parent = path.join(tmp, 'services');
  fs.mkdirSync(parent);
  fs.chmodSync(tmp, 0o711); // mkdtemp's 0700 would hide the service from its own user
  fs.chmodSync(parent, 0o711);
  const dir = path.join(parent, 'private');
  fs.mkdirSync(dir, { mode: 0o700 });
  fs.copyFileSync(ADDON, path.join(dir, 'addon.node'));
  fs.writeFileSync(path.join(dir, 'service.js'), `
    require('./addon.node').setSpanContext('${IDS.traceA}', '${IDS.spanA}', 1);
    console.log('ready');
    let x = 0; for (;;) for (let i = 0; i < 1e6; i++) x += Math.sqrt(i);
  `);
  for (const f of ['', 'addon.node', 'service.js']) {
    fs.chownSync(path.join(dir, f), 65534, 65534);
    if (f !== '') fs.chmodSync(path.join(dir, f), 0o600);
  }
  const service = spawn('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, path.join(dir, 'service.js')],
    { stdio: ['ignore', 'pipe', 'inherit'], cwd: '/' });
  t.after(() => service.kill('SIGKILL'));
  await new Promise((resolve, reject) => {
    service.stdout.once('data', resolve);
    service.once('exit', (code) => reject(new Error(`the service exited (${code}) before it was ready`)));
  });

  const record = (caps) => sh('setpriv', ['--inh-caps=-all', `--bounding-set=-all,${caps.map((c) => `+${c.toLowerCase()}`).join(',')}`,
    reader, 'record', String(service.pid), '--duration', '1500ms', '--off-cpu', '--kernel', '--top', '0']);
  const granted = unitCapabilities();
  const r = record(granted);
  assert.equal(r.status, 0, r.shown);
  const carried = /([\d.]+)% of CPU samples carry a span/.exec(r.stdout);
  assert.ok(carried && Number(carried[1]) > 90, `samples linked to the service's span with ${granted.join(',')}:\n${r.stdout}`);
  assert.match(r.stdout, new RegExp(IDS.traceA));

  // SYS_RESOURCE (kernels before 5.11) and SYSLOG (kernel.kptr_restrict 1) are needed on other
  // kernels and settings than this machine's, so only the others are shown to be needed here.
  // Without SYS_PTRACE or DAC_READ_SEARCH the service's addon cannot be opened: a permission
  // error naming the object and the two capabilities.
  const unreadable = /could not all be read.*(Permission denied|Operation not permitted).*CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH/;
  for (const [dropped, code, why] of [['BPF', 5, /eBPF needs root/], ['PERFMON', 5, /eBPF needs root/],
    ['SYS_PTRACE', 5, unreadable], ['DAC_READ_SEARCH', 5, unreadable]]) {
    const without = record(granted.filter((c) => c !== dropped));
    assert.equal(without.status, code, `without ${dropped}: ${without.shown}`);
    assert.match(without.stderr, why, `without ${dropped}`);
    assert.doesNotMatch(without.stdout, /carry a span/, `without ${dropped}`);
  }
});
