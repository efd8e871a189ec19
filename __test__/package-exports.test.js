'use strict';
// The package entry point exports every function and value index.d.ts declares, and nothing the
// typings do not describe.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');

const { declaredExports } = require('./helpers/typings');

const ROOT = path.join(__dirname, '..');
const declaredNames = () => new Set(declaredExports(path.join(ROOT, 'index.d.ts')));

test('every name declared in index.d.ts is exported, and only those', () => {
  const pkg = require(ROOT);
  const declared = declaredNames();
  assert.ok(declared.size >= 10, `expected index.d.ts to declare the API, found only ${[...declared].join(', ')}`);
  for (const name of declared) {
    assert.notEqual(pkg[name], undefined, `index.d.ts declares ${name}, but require('otel-thread-ctx').${name} is undefined`);
  }
  for (const name of Object.keys(pkg)) {
    assert.ok(declared.has(name), `the package exports ${name}, which index.d.ts does not declare`);
  }
});

test('import of the package sees the same exports, by name and as a namespace', async () => {
  // Through the package's own name: package.json "exports", as a service resolves it.
  const ns = await import('otel-thread-ctx');
  const cjs = require(ROOT);
  const declared = [...declaredNames()].sort();
  const named = Object.keys(ns).filter((k) => k !== 'default' && k !== 'module.exports').sort();
  assert.deepEqual(named, declared, 'import * as m: the names index.d.ts declares (cjs-module-lexer must see every one)');
  for (const name of declared) assert.equal(ns[name], cjs[name], `import { ${name} } is require('otel-thread-ctx').${name}`);
  assert.equal(ns.default, cjs);
});
