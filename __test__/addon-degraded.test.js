'use strict';
// Faults and unusual runtimes degrade gracefully and are reported by threadInfo().
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const { ROOT, IDS, isRoot } = require('./helpers/addon');

const PROBE = `
  const { Worker } = require('node:worker_threads');
  const api = require(${JSON.stringify(ROOT)});
  const v = api.recordView();
  // Write through the fast path, read back through the native side.
  v[24] = 0; v.set(Buffer.from('${IDS.traceA}${IDS.spanA}', 'hex'), 0); v[25] = 1; v[24] = 1;
  const viaView = api.getSpanContext();
  api.setSpanContext('${IDS.traceB}', '${IDS.spanB}', 0);
  const viaNative = Buffer.from(v.subarray(0, 26)).toString('hex');
  const w = new Worker("const api = require('${ROOT}'); api.setSpanContext('${IDS.traceA}', '${IDS.spanA}'); require('node:worker_threads').parentPort.postMessage({ info: api.threadInfo(), sc: api.getSpanContext() })", { eval: true });
  w.once('message', (worker) => { console.log(JSON.stringify({ info: api.threadInfo(), viaView, viaNative, worker }, (k, x) => typeof x === 'bigint' ? String(x) : x)); w.terminate(); });
`;

function probe(env = {}, wrap = []) {
  const cmd = [...wrap, process.execPath, '-e', PROBE];
  const r = spawnSync(cmd[0], cmd.slice(1), { env: { ...process.env, OTEL_THREAD_CTX_REQUIRE_NATIVE: '1', ...env }, encoding: 'utf8' });
  assert.equal(r.status, 0, `probe failed (${cmd.slice(0, wrap.length + 1).join(' ')}): ${r.stderr}`);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(out.viaView, { traceId: IDS.traceA, spanId: IDS.spanA, traceFlags: 1 }, 'fast-path write not visible');
  assert.equal(out.viaNative, (IDS.traceB + IDS.spanB).toLowerCase() + '0100', 'native write not visible in the view');
  assert.deepEqual(out.worker.sc, { traceId: IDS.traceA, spanId: IDS.spanA, traceFlags: 1 });
  return out;
}

test('forced dynamic TLS (glibc optional static TLS = 0): still works, reported as dynamic', () => {
  const { info, worker } = probe({ GLIBC_TUNABLES: 'glibc.rtld.optional_static_tls=0' });
  assert.equal(info.tlsModel, 'dynamic');
  assert.equal(info.tlsOffset, null);
  assert.equal(worker.info.tlsModel, 'dynamic');
});

// Official Node builds never refuse: OTEL_THREAD_CTX_HEAP_PAGE (a test hook, CONTRIBUTING.md)
// makes Node-API's answer the refusal (napi_no_external_buffers_allowed) that a runtime built
// with V8's sandbox gives, after the page is mapped, so the refusal is met where it would be.
test('runtime refusing external ArrayBuffers: the page lives in a V8 ArrayBuffer instead', () => {
  const { info, worker } = probe({ OTEL_THREAD_CTX_HEAP_PAGE: '1' });
  assert.equal(info.pageBacking, 'arraybuffer');
  assert.equal(worker.info.pageBacking, 'arraybuffer');
  assert.equal(BigInt(info.recordAddress) % 4096n, 0n, 'page-aligned slice');
  assert.equal(info.error, null);
});

test('mlock refused: carries on unpinned and says why', () => {
  // RLIMIT_MEMLOCK 0 and no CAP_IPC_LOCK (root drops it; others have none): mlock fails with EPERM.
  const dropCap = isRoot ? ['setpriv', '--bounding-set=-ipc_lock', '--inh-caps=-ipc_lock'] : [];
  const { info, worker } = probe({}, ['prlimit', '--memlock=0:0', ...dropCap]);
  assert.equal(info.pinned, false);
  assert.match(info.pinError, /mlock failed: Operation not permitted/);
  assert.equal(worker.info.pinned, false);
});

test('not built / unsupported platform: the package loads and calls are no-ops', () => {
  const r = spawnSync(process.execPath, ['-e', `
    const Module = require('node:module');
    const orig = Module._load;
    Module._load = function (req, ...rest) { if (String(req).endsWith('.node')) throw new Error('simulated: no binary for this platform'); return orig.call(this, req, ...rest); };
    const api = require(${JSON.stringify(ROOT)});
    api.setSpanContext('x', 'y'); api.clearSpanContext();
    console.log(JSON.stringify({ sc: api.getSpanContext(), info: api.threadInfo(), len: api.recordView().length }));
  `], { env: { ...process.env, OTEL_THREAD_CTX_REQUIRE_NATIVE: '' }, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.sc, null);
  assert.equal(out.info.supported, false);
  assert.match(out.info.error, /native addon unavailable .*simulated/);
  assert.equal(out.len, 640);
  assert.match(r.stderr, /OTEL_THREAD_CTX_NATIVE_UNAVAILABLE|native addon unavailable/);
});
