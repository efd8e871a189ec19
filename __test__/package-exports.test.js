'use strict';
// The package entry point exports every function and value index.d.ts declares, and nothing the
// typings do not describe.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');

function declaredNames() {
  const dts = fs.readFileSync(path.join(ROOT, 'index.d.ts'), 'utf8');
  const names = new Set();
  for (const m of dts.matchAll(/^export (?:declare )?(?:function|class|const) (\w+)/gm)) names.add(m[1]);
  return names;
}

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
