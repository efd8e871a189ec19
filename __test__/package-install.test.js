'use strict';
// The release tarball installs into a fresh service on a machine without Rust and works there.
// `scripts/release.sh` builds it; `npm install --offline` puts it into a new project outside the
// checkout (our packages come from the files, the peer dependencies from npm's cache), and from
// then on PATH holds node, npm, npx and sh only: no cargo, no rustc. The installed package
// publishes a record, `npx thread-ctx` runs the bundled reader, and (as root) `thread-ctx dump`
// of a service using the installed package reads that record. The registry layout (platform
// package beside the main one, found through optionalDependencies) is installed the same way.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const { IDS, isRoot } = require('./helpers/addon');
const { canRun } = require('./helpers/needs');
const { expectNodejs } = require('./nodejs-schema-helpers');

const { pkg, PLATFORM_PACKAGE, ENV, work, run, ok, release, newService } = require('./helpers/release');
const { jsFiles } = require('./helpers/js-imports');

const ROOT = path.join(__dirname, '..');

function tarList(tgz) {
  return execFileSync('tar', ['-tzf', tgz], { encoding: 'utf8' }).trim().split('\n').sort();
}

// What a service sees: publishes a span, reads it back; prints where everything loaded from.
const PUBLISH = `
  const api = require('otel-thread-ctx');
  api.setSpanContext('${IDS.traceA}', '${IDS.spanA}', 1);
  console.log(JSON.stringify({
    info: api.threadInfo(), read: api.getSpanContext(), entry: require.resolve('otel-thread-ctx'),
    addons: Object.keys(require.cache).filter((f) => f.endsWith('.node')),
    manager: typeof api.ThreadContextManager,
  }, (k, v) => (typeof v === 'bigint' ? String(v) : v)));
`;

function checkPublishes(dir, addonDir) {
  const rust = run('sh', ['-c', 'command -v cargo || command -v rustc'], dir);
  assert.ok(rust.status !== 0 && rust.stdout === '', `cargo or rustc is on the test PATH: ${rust.stdout}`);
  const r = ok('node', ['-e', PUBLISH], dir);
  const seen = JSON.parse(r.stdout);
  assert.equal(seen.info.supported, true, `threadInfo() of the installed package: ${JSON.stringify(seen.info)}`);
  assert.deepEqual(seen.read, { traceId: IDS.traceA, spanId: IDS.spanA, traceFlags: 1 });
  assert.equal(seen.entry, path.join(dir, 'node_modules', pkg.name, 'js', 'index.js'));
  assert.deepEqual(seen.addons, [path.join(addonDir, `${pkg.name}.linux-x64-gnu.node`)], 'the addon loaded from the platform package');
  assert.equal(seen.manager, 'function', 'the context manager loads with the installed peers');
}

// Schema 'nodejs' from the installed package: the V8 addon of this Node's ABI loads from the
// platform package where the runtime has AsyncContextFrame, and a span is found from the frame;
// elsewhere the manager publishes with 'tls' after one warning.
const NODEJS_SCHEMA = `
  const { trace, context, ROOT_CONTEXT } = require('@opentelemetry/api');
  const api = require('otel-thread-ctx');
  const manager = api.register({ schema: 'nodejs' });
  const ctx = trace.setSpanContext(ROOT_CONTEXT, { traceId: '${IDS.traceA}', spanId: '${IDS.spanA}', traceFlags: 1 });
  context.with(ctx, async () => {
    await new Promise((resolve) => setTimeout(resolve, 1));
    console.log(JSON.stringify({ schema: manager.schema, fallback: manager.schemaFallback, seen: api.getFrameSpanContext(),
      addons: Object.keys(require.cache).filter((f) => f.endsWith('.node')) }));
  });
`;

function checkNodejsSchema(dir, addonDir) {
  const flags = process.execArgv.filter((a) => a.includes('async-context-frame'));
  const r = ok('node', [...flags, '-e', NODEJS_SCHEMA], dir);
  const seen = JSON.parse(r.stdout);
  if (!expectNodejs) {
    assert.equal(seen.schema, 'tls', r.stdout);
    assert.match(r.stderr, /OTEL_THREAD_CTX_SCHEMA_FALLBACK/);
    return;
  }
  assert.equal(seen.schema, 'nodejs', `fell back: ${seen.fallback}`);
  assert.deepEqual(seen.addons.sort(), [path.join(addonDir, `${pkg.name}.linux-x64-gnu.node`),
    path.join(addonDir, 'v8-addon', `node-abi${process.versions.modules}.node`)].sort());
  assert.deepEqual([seen.seen.traceId, seen.seen.spanId, seen.seen.traceFlags], [IDS.traceA, IDS.spanA, 1]);
}

function checkVersion(dir) {
  const r = ok('npx', ['--no', '--offline', 'thread-ctx', '--version'], dir);
  assert.equal(r.stdout.trim(), `thread-ctx ${pkg.version}`);
}

test('the release tarball bundles the addon and thread-ctx, and nothing from the checkout', { timeout: 900_000 }, (t) => {
  const d = release();
  const files = tarList(d.main);
  const nested = `package/node_modules/${PLATFORM_PACKAGE}`;
  // Every file of the JS layer, in whichever folder it lives.
  const jsLayer = jsFiles(path.join(ROOT, 'js')).map((f) => `package/${path.relative(ROOT, f)}`);
  for (const f of ['package/package.json', 'package/bin/thread-ctx.js', ...jsLayer,
    'package/index.d.ts', 'package/README.md', 'package/docs/api.md', `${nested}/package.json`, `${nested}/thread-ctx`,
    `${nested}/${pkg.name}.linux-x64-gnu.node`, ...[127, 137, 147].map((abi) => `${nested}/v8-addon/node-abi${abi}.node`)]) {
    assert.ok(files.includes(f), `${f} is missing from ${d.main}: ${files.join(' ')}`);
  }
  for (const f of files) {
    assert.match(f, /^package\/(js\/|bin\/|docs\/|index\.d\.ts$|README\.md$|LICENSE$|CONTRIBUTING\.md$|package\.json$|node_modules\/otel-thread-ctx-linux-x64-gnu\/)/,
      `${f} should not be in the tarball`);
  }
  const manifest = JSON.parse(execFileSync('tar', ['-xzOf', d.main, 'package/package.json'], { encoding: 'utf8' }));
  assert.deepEqual(manifest.optionalDependencies, { [PLATFORM_PACKAGE]: pkg.version });
  assert.deepEqual(manifest.bundleDependencies, [PLATFORM_PACKAGE]);
  assert.equal(manifest.scripts, undefined, 'no development scripts in the published manifest');
  assert.equal(manifest.bin['thread-ctx'], 'bin/thread-ctx.js');
  const platform = JSON.parse(execFileSync('tar', ['-xzOf', d.platform, 'package/package.json'], { encoding: 'utf8' }));
  assert.deepEqual([platform.os, platform.cpu, platform.libc], [['linux'], ['x64'], ['glibc']]);
  const registryFiles = tarList(d.registry);
  assert.ok(!registryFiles.some((f) => f.includes('node_modules/')), `the registry tarball bundles nothing: ${registryFiles}`);
  // Stripped: no .symtab in thread-ctx; the addon keeps otel_thread_ctx_v1 in .dynsym.
  const unpacked = path.join(work, 'unpacked');
  fs.mkdirSync(unpacked);
  execFileSync('tar', ['-xzf', d.platform, '-C', unpacked]);
  const binary = path.join(unpacked, 'package/thread-ctx');
  const sections = execFileSync('readelf', ['-SW', binary], { encoding: 'utf8' });
  assert.ok(!sections.includes('.symtab'), 'thread-ctx is stripped');
  // libelf and zlib are linked in: the binary needs nothing a glibc system lacks.
  const needed = [...execFileSync('readelf', ['-dW', binary], { encoding: 'utf8' }).matchAll(/\(NEEDED\).*\[(.+)\]/g)].map((m) => m[1]);
  for (const lib of needed) assert.match(lib, /^(libc\.so\.6|libgcc_s\.so\.1|libm\.so\.6|ld-linux-x86-64\.so\.2)$/, `thread-ctx needs ${needed}`);
  const dynsym = execFileSync('readelf', ['--dyn-syms', '-W', path.join(unpacked, `package/${pkg.name}.linux-x64-gnu.node`)], { encoding: 'utf8' });
  assert.match(dynsym, /TLS\s+GLOBAL\s+DEFAULT\s+\d+\s+otel_thread_ctx_v1/);
  for (const abi of [127, 137, 147]) {
    const v8Addon = path.join(unpacked, `package/v8-addon/node-abi${abi}.node`);
    assert.match(execFileSync('readelf', ['--dyn-syms', '-W', v8Addon], { encoding: 'utf8' }),
      /32 TLS\s+GLOBAL\s+DEFAULT\s+\d+\s+otel_thread_ctx_nodejs_v1/, `${v8Addon} exports otel_thread_ctx_nodejs_v1`);
    assert.match(execFileSync('readelf', ['-rW', v8Addon], { encoding: 'utf8' }), /R_X86_64_TLSDESC\s+\S+\s+otel_thread_ctx_nodejs_v1/,
      'reached through TLSDESC');
  }
  t.diagnostic(`${path.basename(d.main)}: ${(fs.statSync(d.main).size / 1024).toFixed(0)} KiB, ${files.length} files`);
});

test('npm install of the tarball, offline, without Rust: the package publishes and npx thread-ctx runs', { timeout: 900_000 }, async (t) => {
  const d = release();
  const dir = newService('service', [d.main]);
  const installed = path.join(dir, 'node_modules', pkg.name);
  const platformDir = path.join(installed, 'node_modules', PLATFORM_PACKAGE);
  assert.ok(!fs.lstatSync(installed).isSymbolicLink(), 'installed as files, not a link to the checkout');
  checkPublishes(dir, platformDir);
  checkNodejsSchema(dir, platformDir);
  checkVersion(dir);

  // A platform without a prebuilt: the package loads as no-ops, the command says why.
  const fake = path.join(work, 'pretend-darwin.js');
  fs.writeFileSync(fake, "Object.defineProperty(process, 'platform', { value: 'darwin' });\n");
  const noop = run('node', ['-r', fake, '-e', "const a = require('otel-thread-ctx'); console.log(a.threadInfo().supported)"], dir,
    { env: { ...ENV, OTEL_THREAD_CTX_REQUIRE_NATIVE: '' } });
  assert.equal(noop.status, 0, noop.shown);
  assert.equal(noop.stdout.trim(), 'false');
  assert.match(noop.stderr, /OTEL_THREAD_CTX_NATIVE_UNAVAILABLE|native addon unavailable \(no prebuilt otel-thread-ctx for darwin-x64/);
  const cli = run('node', ['-r', fake, path.join(installed, 'bin', 'thread-ctx.js'), '--version'], dir);
  assert.equal(cli.status, 3, cli.shown);
  assert.match(cli.stderr, /^thread-ctx: no prebuilt otel-thread-ctx for darwin-x64 \(prebuilt for: linux-x64-gnu\)/);

  if (!canRun(t, isRoot ? false : 'thread-ctx dump of the installed service: ptrace of another process needs root here')) return;
  // `thread-ctx dump` (through npx) of a service that uses the installed package.
  const service = spawn('node', ['-e', `${PUBLISH}; setInterval(() => {}, 1000);`], { cwd: dir, env: ENV, stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => service.kill('SIGKILL'));
  const [line] = await Promise.race([
    new Promise((resolve) => service.stdout.once('data', (b) => resolve(String(b).split('\n')))),
    new Promise((_, reject) => setTimeout(() => reject(new Error('the service did not start in 60 s')), 60_000).unref()),
  ]);
  const tid = JSON.parse(line).info.tid;
  const dump = ok('npx', ['--no', '--offline', 'thread-ctx', 'dump', String(service.pid), '--json'], dir);
  const thread = JSON.parse(dump.stdout).threads.find((th) => th.tid === tid);
  assert.ok(thread, `no thread ${tid} in the dump: ${dump.stdout}`);
  assert.deepEqual([thread.state, thread.trace_id, thread.span_id, thread.writer],
    ['valid', IDS.traceA, IDS.spanA, path.join(platformDir, `${pkg.name}.linux-x64-gnu.node`)], dump.stdout);
});

test('the registry layout: the platform package installed beside the package, found by name', { timeout: 900_000 }, () => {
  const d = release();
  const dir = newService('service-registry', [d.platform, d.registry]);
  checkPublishes(dir, path.join(dir, 'node_modules', PLATFORM_PACKAGE));
  checkNodejsSchema(dir, path.join(dir, 'node_modules', PLATFORM_PACKAGE));
  checkVersion(dir);
});
