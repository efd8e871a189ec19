'use strict';
// The OTEP 4719 process context, read back from outside the publishing process (maps, then
// /proc/PID/mem with the published-at re-check) and decoded by protoc, not by the addon.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { ROOT } = require('./helpers/addon');
const { startChild } = require('./helpers/child');
const { hasProtoc, readProcessContext, readOnce, findMapping, decodePayload, decodePayloads } = require('./process-context-reader');
const { needs } = require('./helpers/needs');

const need = needs(hasProtoc ? false : 'protoc is not installed (apt-get install -y protobuf-compiler)');

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const SDK_VERSION = require('@opentelemetry/core').SDK_INFO['telemetry.sdk.version'];

test('from OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES: header, every attribute, read from outside', { skip: need.skip, timeout: 60_000 }, need.guard(async (t) => {
  const child = startChild(t, `
    lib.register({ attributes: ['http.route', 'http.request.method'] });
    const info = pc.processContextInfo();
    say({ id: info.serviceInstanceId, backing: info.backing });
  `, {
    OTEL_SERVICE_NAME: 'checkout',
    OTEL_RESOURCE_ATTRIBUTES: 'service.version=1.2.3,deployment.environment.name=prod%20eu,service.name=ignored',
  });
  const info = await child.next();
  const { mapping, header, payload } = readProcessContext(child.pid);
  assert.match(mapping.line, /\/memfd:OTEL_CTX \(deleted\)$/, `expected the memfd-backed mapping in maps, got ${mapping.line}`);
  assert.equal(info.backing, 'memfd');
  assert.equal(header.signature, 'OTEL_CTX');
  assert.equal(header.version, 2, 'expected header version 2');
  assert.notEqual(header.publishedAt, 0n, 'expected published-at != 0 once published');
  assert.equal(header.payloadSize, payload.length);
  const ctx = decodePayload(payload);
  assert.deepEqual(ctx.resource, {
    'service.name': 'checkout',
    'service.version': '1.2.3',
    'deployment.environment.name': 'prod eu',
    'telemetry.sdk.name': 'opentelemetry',
    'telemetry.sdk.language': 'nodejs',
    'telemetry.sdk.version': SDK_VERSION,
    'process.runtime.name': 'node',
    'process.pid': child.pid,
    'service.instance.id': info.id,
  });
  assert.match(info.id, UUID, 'expected a generated UUID v4 service.instance.id');
  assert.deepEqual(ctx.attributes, {
    'threadlocal.schema_version': 'tlsdesc_v1_dev',
    'threadlocal.attribute_key_map': ['http.route', 'http.request.method'],
  });
  // protoc's schema-less decoder accepts it too.
  const raw = execFileSync('protoc', ['--decode_raw'], { input: payload, encoding: 'utf8' });
  assert.match(raw, /tlsdesc_v1_dev/, `protoc --decode_raw output lacks the schema version:\n${raw}`);
}));

test('from an OpenTelemetry Resource: its attributes win, with their types', { skip: need.skip, timeout: 60_000 }, need.guard(async (t) => {
  const child = startChild(t, `
    const { resourceFromAttributes } = require('@opentelemetry/resources');
    lib.register({ resource: resourceFromAttributes({
      'service.name': 'api', 'service.instance.id': 'instance-7', 'host.cores': 2, 'ratio': 0.5,
      'flag': true, 'tags': ['a', 'b'], 'skipped': undefined,
    }) });
    say({});
  `, { OTEL_SERVICE_NAME: 'from-env' });
  await child.next();
  const ctx = decodePayload(readProcessContext(child.pid).payload);
  assert.deepEqual(ctx.resource, {
    'service.name': 'api', 'service.instance.id': 'instance-7', 'host.cores': 2, ratio: 0.5, flag: true, tags: ['a', 'b'],
    'telemetry.sdk.name': 'opentelemetry', 'telemetry.sdk.language': 'nodejs', 'telemetry.sdk.version': SDK_VERSION,
    'process.runtime.name': 'node', 'process.pid': child.pid,
  });
  assert.deepEqual(ctx.attributes['threadlocal.attribute_key_map'], []);
}));

test('appending a key at run time republishes: new published-at, key map extended in order', { skip: need.skip, timeout: 60_000 }, need.guard(async (t) => {
  const child = startChild(t, `
    onLine((key) => say(pc.registerAttributeKeys(key.split(','))));
    lib.register({ attributes: ['http.route'] });
    say([]);
  `);
  await child.next();
  const before = readProcessContext(child.pid);
  child.send('http.request.method,http.route');
  assert.deepEqual(await child.next(), [1, 0], 'a known key keeps its index, a new one is appended');
  const after = readProcessContext(child.pid);
  assert.ok(after.header.publishedAt > before.header.publishedAt,
    `expected published-at to change on update: ${before.header.publishedAt} then ${after.header.publishedAt}`);
  assert.deepEqual(decodePayload(after.payload).attributes['threadlocal.attribute_key_map'], ['http.route', 'http.request.method']);
  child.send('http.route');
  assert.deepEqual(await child.next(), [0]);
  assert.equal(readProcessContext(child.pid).header.publishedAt, after.header.publishedAt, 'nothing new: no republish');
}));

// The writer republishes until the reader has read MIN_VERSIONS distinct versions (and at least
// 10,000 times), so a busy machine that starves either side makes the race longer, not weaker.
const MIN_VERSIONS = 20;

test('a reader racing >= 10,000 republishes never accepts a payload that fails to parse', { skip: need.skip, timeout: 120_000 }, need.guard(async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'otel-ctx-race-'));
  const [stopFile, doneFile] = [path.join(dir, 'stop'), path.join(dir, 'done')];
  const child = startChild(t, `
    const { resourceFromAttributes } = require('@opentelemetry/resources');
    const fs = require('node:fs');
    lib.register({ attributes: ['http.route'] });
    const stopped = (i) => i >= 10000 && i % 64 === 0 && fs.existsSync(${JSON.stringify(stopFile)});
    onLine(() => {
      for (let i = 0; !stopped(i); i++) {
        // Sizes vary, so a torn read would show.
        pc.publishProcessContext({ resource: resourceFromAttributes({ 'service.name': 'race', 'race.counter': i, pad: 'x'.repeat((i % 37) * 9) }) });
      }
      fs.writeFileSync(${JSON.stringify(doneFile)}, 'done');
    });
    say({});
  `);
  await child.next();
  const { start } = findMapping(child.pid);
  const fd = fs.openSync(`/proc/${child.pid}/mem`, 'r');
  const accepted = [];
  const stamps = new Set();
  let retries = 0;
  child.send('go');
  const deadline = Date.now() + 60_000;
  try {
    for (let i = 0; ; i++) {
      const r = readOnce(fd, start);
      if (r.payload === null) retries++;
      else if (!stamps.has(r.header.publishedAt)) {
        stamps.add(r.header.publishedAt);
        accepted.push(r.payload);
      }
      if (i % 64 !== 0) continue;
      if (accepted.length >= MIN_VERSIONS || Date.now() > deadline) fs.writeFileSync(stopFile, 'stop');
      if (fs.existsSync(doneFile) || Date.now() > deadline + 10_000) break;
    }
  } finally {
    fs.closeSync(fd);
  }
  assert.ok(fs.existsSync(doneFile), 'the writer did not finish its republishes in time');
  assert.ok(accepted.length >= MIN_VERSIONS, `expected to read ${MIN_VERSIONS} versions while the writer republished, got ${accepted.length}`);
  const decoded = decodePayloads(accepted);
  assert.equal(decoded.length, accepted.length);
  let last = -1;
  for (const [i, ctx] of decoded.entries()) {
    assert.equal(ctx.attributes['threadlocal.schema_version'], 'tlsdesc_v1_dev', `payload ${i} lacks the schema version`);
    const n = ctx.resource['race.counter'];
    if (n === undefined) continue; // the version published before the race
    assert.equal(ctx.resource.pad, 'x'.repeat((n % 37) * 9), `payload ${i}: pad does not match counter ${n}`);
    assert.ok(n > last, `versions must only move forward: ${n} after ${last}`);
    last = n;
  }
  t.diagnostic(`${accepted.length} distinct versions read and parsed, ${retries} reads retried (mid-update)`);
}));

test('bad input: clear errors, nothing published', { timeout: 30_000 }, async () => {
  process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
  const pc = require('../js/process-context/process-context');
  const { register } = require('../js/manager/register');
  const { enabledThreadContextManager } = require('../js/tls/context-manager');
  pc.registerAttributeKeys(['http.route']);
  const before = pc.processContextInfo();
  const cases = [
    [() => pc.registerAttributeKeys(Array.from({ length: 256 }, (_, i) => `k${i}`)), RangeError,
      /^attributes: expected at most 256 keys in the attribute key map, got 257 \(1 registered \+ 256 new\)/],
    [() => pc.registerAttributeKeys(['a', 7]), TypeError, /^attributes\[1\]: expected a string key, got number 7/],
    [() => pc.registerAttributeKeys('http.route'), TypeError, /^attributes: expected an array of attribute key strings, got string "http.route"/],
    [() => pc.registerAttributeKeys(['a', 'b', 'a']), RangeError, /^attributes\[2\]: duplicate key "a" \(also at index 0\)/],
    [() => pc.registerAttributeKeys(['']), RangeError, /^attributes\[0\]: expected a non-empty key/],
    [() => pc.registerAttributeKeys(['ok', 'é'.repeat(128)]), RangeError, /^attributes\[1\]: expected a key of at most 255 UTF-8 bytes, got 256$/],
    [() => pc.registerAttributeKeys(Array.from({ length: 20 }, (_, i) => `${i}`.padEnd(250, 'k'))), RangeError,
      /^attributes: expected at most 4096 UTF-8 bytes of keys in the attribute key map, got 5010 /],
    [() => pc.publishProcessContext({ resource: 'svc' }), TypeError, /^options\.resource: expected an OpenTelemetry Resource/],
    [() => pc.publishProcessContext({ resource: { attributes: 7 } }), TypeError, /^options\.resource\.attributes: expected an object of resource attributes, got number 7/],
    [() => pc.publishProcessContext({ resourse: {} }), TypeError, /^options\.resourse: unknown option \(expected resource\)/],
    [() => register({ attributes: ['ok', 42] }), TypeError, /^options\.attributes\[1\]: expected a string key/],
    [() => register({ resource: 5 }), TypeError, /^options\.resource: expected/],
    [() => register({ atributes: ['http.route'] }), TypeError, /^options\.atributes: unknown option \(expected contextManager, asyncTracking, attributes, resource, schema, tlsSchemaVersion, allocations\)/],
    [() => register({ tlsSchemaVersion: 'tls_v2' }), RangeError, /^options\.tlsSchemaVersion: expected 'tlsdesc_v1_dev' or 'tls_v1', got "tls_v2"$/],
    [() => register({ tlsSchemaVersion: 1 }), TypeError, /^options\.tlsSchemaVersion: expected 'tlsdesc_v1_dev' or 'tls_v1', got number 1$/],
    [() => require('../js/native/addon').setThreadContextSchema('tls'), Error, /^schemaVersion: expected "tlsdesc_v1_dev", "tls_v1", "nodejs_v1_dev", got "tls"$/],
  ];
  for (const [fn, type, message] of cases) assert.throws(fn, (e) => e instanceof type && message.test(e.message), `expected ${type.name} ${message}`);
  const after = pc.processContextInfo();
  assert.deepEqual([after.publishedAt, after.publishCount, after.keyCount], [before.publishedAt, before.publishCount, before.keyCount],
    'a rejected call must not republish');
  assert.deepEqual(pc.attributeKeyMap(), ['http.route']);
  assert.equal(enabledThreadContextManager(), null, 'a rejected register() must not install a manager');
});

test('one process context for all threads: a worker appends to the same key map, keeps the resource', { timeout: 30_000 }, async () => {
  const { Worker } = require('node:worker_threads');
  const pc = require('../js/process-context/process-context');
  pc.publishProcessContext({ resource: { attributes: { 'service.name': 'main-thread' } } });
  const before = pc.processContextInfo();
  // What every thread reads per new span instead of a call: the process-wide count, in place.
  const countView = require('../js/native/addon').keyCountView();
  assert.ok(countView instanceof Uint32Array && countView.length === 1, 'keyCountView(): one Uint32 over the count');
  const worker = new Worker(`
    process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
    const { parentPort } = require('node:worker_threads');
    const pc = require(${JSON.stringify(path.join(ROOT, 'js', 'process-context', 'process-context'))});
    require(${JSON.stringify(path.join(ROOT, 'js', 'manager', 'register'))}).register({ attributes: ['worker.key', 'http.route'] });
    parentPort.postMessage({ indices: pc.registerAttributeKeys(['worker.key']), info: pc.processContextInfo() });
  `, { eval: true });
  const { indices, info } = await new Promise((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject); });
  await worker.terminate();
  const known = pc.attributeKeyMap().length;
  assert.equal(info.serviceInstanceId, before.serviceInstanceId, 'one service.instance.id per process');
  assert.equal(info.headerAddress, before.headerAddress, 'one OTEL_CTX mapping per process');
  assert.deepEqual(pc.attributeKeyMap().slice(-1), ['worker.key']);
  assert.equal(indices[0], known - 1);
  assert.equal(pc.keyIndex('worker.key'), known - 1, "the main thread's mirror of the key map follows the worker's append");
  assert.equal(countView[0], known, "a view made before the worker's append reads the count after it");
  const header = readOnce(fs.openSync(`/proc/${process.pid}/mem`, 'r'), Number(before.headerAddress));
  assert.ok(header.payload !== null);
  if (hasProtoc) assert.equal(decodePayload(header.payload).resource['service.name'], 'main-thread', "a worker's register() must keep the resource");
});
