'use strict';
// Uncaught exceptions inside callbacks (swallowed by an uncaughtException handler) must not leave
// a stale span published. Runs context-uncaught-child.js in a real child process.

const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');

test('callbacks that throw inside spans leave no stale span', () => {
  const out = execFileSync(process.execPath, [...process.execArgv, path.join(__dirname, 'context-uncaught-child.js')],
    { encoding: 'utf8', timeout: 20000 });
  const result = JSON.parse(out.trim().split('\n').pop());
  assert.deepEqual(result.caught,
    ['in nested runInAsyncScope', 'in nextTick', 'in queueMicrotask', 'in timer', 'in with inside an immediate',
      'unhandled rejection after await'],
    'expected the child to throw and catch all six errors');
  assert.deepEqual(result.violations, [], `expected none between callbacks after the throws, saw ${result.violations}`);
  assert.ok(result.checks > 3, `expected callback ends to be observed, saw ${result.checks}`);
  assert.equal(result.record, null, `expected none at the end, saw ${result.record}`);
});
