'use strict';
// index.d.ts and the package agree: __test__/types/ uses every export as the typings describe it,
// from an ES module (named imports and a namespace) and from CommonJS (import = require). tsc
// (strict, module nodenext) checks it against index.d.ts, including calls the types must refuse;
// the compiled files then run on the Node under test and check that every call does what its type
// says, and that the refused calls throw the TypeError or RangeError the typings promise.
// (scripts/test.sh runs the same check as `tsc --noEmit` before the tests.)
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const ROOT = path.join(__dirname, '..');
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

test('the typed usage of every export compiles under strict nodenext and runs as typed, in ESM and CommonJS', () => {
  // Inside the checkout, so that the compiled files import the package by its name (self-reference).
  const out = path.join(ROOT, 'target', `types-test-${process.pid}`);
  fs.rmSync(out, { recursive: true, force: true });
  try {
    const tsc = spawnSync(process.execPath, [TSC, '-p', path.join(__dirname, 'types', 'tsconfig.json'), '--noEmit', 'false', '--outDir', out],
      { encoding: 'utf8', timeout: 300_000 });
    assert.equal(tsc.status, 0, `tsc:\n${tsc.stdout}${tsc.stderr}${tsc.error ? tsc.error.message : ''}`);
    for (const file of ['esm.mjs', 'cjs.cjs']) {
      const flags = process.execArgv.filter((a) => a.includes('async-context-frame')); // the matrix's 22acf, 24noacf
      const r = spawnSync(process.execPath, [...flags, path.join(out, file)], { encoding: 'utf8', timeout: 60_000 });
      assert.equal(r.status, 0, `${file} (compiled from __test__/types/) exited ${r.status}:\n${r.stdout}${r.stderr}`);
    }
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});
