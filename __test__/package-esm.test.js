'use strict';
// The release tarball in an ES-module service ("type": "module"): every name index.d.ts declares
// imports by name and through `import * as`, each the value require() gives, and the context
// manager works through those imports (a span published across an await, read back). Without the
// optional peer dependencies, importing still succeeds, the record API works, and each export of
// the context manager layer throws, when used, an error that says what to install, in ES modules
// and CommonJS alike.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { IDS } = require('./helpers/addon');
const { declaredExports } = require('./helpers/typings');
const { pkg, ok, release, newService } = require('./helpers/release');

const LAYER = ['ThreadContextManager', 'ThreadSpanProcessor', 'register', 'traceActive', 'setAttribute', 'droppedAttributeCount'];

/** Writes `source` as FILE in the service and runs it with the Node under test; its JSON output. */
function runIn(dir, file, source) {
  fs.writeFileSync(path.join(dir, file), source);
  const r = ok('node', [file], dir);
  return JSON.parse(r.stdout);
}

/** ES-module source that imports every declared name and reports what it got. */
function importEveryName(names) {
  return `
import { ${names.join(', ')} } from 'otel-thread-ctx';
import * as ns from 'otel-thread-ctx';
import { createRequire } from 'node:module';
const cjs = createRequire(import.meta.url)('otel-thread-ctx');
const named = { ${names.join(', ')} };
export const seen = {
  namespace: Object.keys(ns).filter((k) => k !== 'default' && k !== 'module.exports').sort(),
  types: Object.fromEntries(Object.entries(named).map(([k, v]) => [k, typeof v])),
  differ: Object.keys(named).filter((k) => named[k] !== cjs[k] || ns[k] !== cjs[k]),
  defaultIsCjs: ns.default === cjs,
};
`;
}

test('an ES-module service imports every export by name and uses the context manager', { timeout: 900_000 }, () => {
  const d = release();
  const dir = newService('service-esm', [d.main], { type: 'module' });
  const names = declaredExports(path.join(dir, 'node_modules', pkg.name, 'index.d.ts'));
  assert.ok(names.length >= 10 && LAYER.every((n) => names.includes(n)), `index.d.ts declares ${names}`);
  fs.writeFileSync(path.join(dir, 'names.js'), importEveryName(names));
  const seen = runIn(dir, 'use.js', `
import { seen } from './names.js';
import { context, trace, ROOT_CONTEXT } from '@opentelemetry/api';
import { ThreadContextManager, register, setAttribute, getSpanContext, threadInfo } from 'otel-thread-ctx';
const manager = register({ attributes: ['http.route'] });
const span = trace.wrapSpanContext({ traceId: '${IDS.traceA}', spanId: '${IDS.spanA}', traceFlags: 1 });
const inSpan = await context.with(trace.setSpan(ROOT_CONTEXT, span), async () => {
  await new Promise((resolve) => setTimeout(resolve, 1));
  return { read: getSpanContext(), attributeSet: setAttribute('http.route', '/esm') };
});
console.log(JSON.stringify({ ...seen, inSpan, after: getSpanContext(), isManager: manager instanceof ThreadContextManager,
  mechanism: manager.mechanism, supported: threadInfo().supported }));
`);
  assert.deepEqual(seen.namespace, names, 'import * as: every declared name');
  assert.deepEqual(seen.differ, [], 'each import is the value require() gives');
  assert.equal(seen.defaultIsCjs, true);
  for (const name of LAYER) assert.equal(seen.types[name], 'function', `${name}: ${JSON.stringify(seen.types)}`);
  assert.equal(seen.supported, true);
  assert.equal(seen.isManager, true, 'register() returns a ThreadContextManager');
  assert.notEqual(seen.mechanism, 'none');
  assert.deepEqual(seen.inSpan, { read: { traceId: IDS.traceA, spanId: IDS.spanA, traceFlags: 1 }, attributeSet: true },
    'the span is published after an await inside context.with()');
  assert.equal(seen.after, null, 'and none outside it');
});

test('without the optional peers: importing works, the layer says what to install when used', { timeout: 900_000 }, () => {
  const d = release();
  const dir = newService('service-esm-no-peers', [d.main], { peers: false, type: 'module' });
  assert.ok(!fs.existsSync(path.join(dir, 'node_modules', '@opentelemetry')), 'no @opentelemetry package installed');
  const names = declaredExports(path.join(dir, 'node_modules', pkg.name, 'index.d.ts'));
  fs.writeFileSync(path.join(dir, 'names.js'), importEveryName(names));
  const attempt = (layer) => `
const failures = {};
for (const name of ${JSON.stringify(LAYER)}) {
  try {
    if (name.startsWith('Thread')) new ${layer}[name](); else ${layer}[name]();
    failures[name] = 'did not throw';
  } catch (err) {
    failures[name] = { code: err.code, message: err.message };
  }
}`;
  const esm = runIn(dir, 'use.js', `
import { seen } from './names.js';
import * as api from 'otel-thread-ctx';
api.setSpanContext('${IDS.traceA}', '${IDS.spanA}', 1);
${attempt('api')}
console.log(JSON.stringify({ ...seen, read: api.getSpanContext(), failures }));
`);
  const cjs = runIn(dir, 'use.cjs', `
const api = require('otel-thread-ctx');
${attempt('api')}
console.log(JSON.stringify({ failures, record: typeof api.setSpanContext }));
`);
  assert.deepEqual(esm.namespace, names);
  assert.deepEqual(esm.differ, []);
  assert.deepEqual(esm.read, { traceId: IDS.traceA, spanId: IDS.spanA, traceFlags: 1 }, 'the record API needs no peer');
  for (const failures of [esm.failures, cjs.failures]) {
    for (const name of LAYER) {
      const f = failures[name];
      assert.equal(f.code, 'OTEL_THREAD_CTX_PEER_MISSING', `${name}: ${JSON.stringify(f)}`);
      assert.match(f.message, /needs the peer dependencies @opentelemetry\/api and @opentelemetry\/context-async-hooks/);
      assert.match(f.message, /npm install @opentelemetry\/api @opentelemetry\/context-async-hooks$/);
    }
  }
});
