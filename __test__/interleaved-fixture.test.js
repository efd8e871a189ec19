'use strict';
// The interleaving workload outside readers sample (fixtures/interleaved-spans.js) runs under both
// schemas: every chain's spans are logged with windows that enclose their pieces, on every thread.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { ROOT } = require('./helpers/addon');
const { skipNodejs } = require('./nodejs-schema-helpers');

const FIXTURE = path.join(__dirname, 'fixtures', 'interleaved-spans.js');
const KINDS = 9;
const SPANS = 3;

async function runFixture(t, schema) {
  const flags = process.execArgv.filter((a) => a.includes('async-context-frame'));
  const child = spawn(process.execPath, [...flags, FIXTURE, ROOT, '--schema', schema, '--spans', String(SPANS), '--piece-us', '50'],
    { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => child.kill('SIGKILL'));
  const lines = [];
  let buffered = '';
  let wake = null;
  child.stdout.on('data', (d) => {
    buffered += d;
    let i;
    while ((i = buffered.indexOf('\n')) >= 0) { lines.push(buffered.slice(0, i)); buffered = buffered.slice(i + 1); }
    if (wake) wake();
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const nextLine = async () => {
    while (lines.length === 0) {
      await Promise.race([new Promise((resolve) => { wake = resolve; }), exited.then((c) => { throw new Error(`fixture exited with ${c}`); })]);
    }
    return lines.shift();
  };
  assert.match(await nextLine(), /^pid \d+$/);
  const threads = [await nextLine(), await nextLine()].map((l) => l.split(' '));
  for (const [word, tid, shown] of threads) assert.deepEqual([word, shown], ['thread', schema], tid);
  assert.equal(await nextLine(), 'ready');
  child.stdin.write('start\n');
  assert.equal(await nextLine(), 'done'); // the chains finish within seconds, more on a busy machine
  child.stdin.write('log\n');
  const log = JSON.parse(await nextLine());
  child.stdin.write('exit\n');
  assert.equal(await exited, 0);
  return { threads, log };
}

function checkLog({ threads, log }) {
  assert.deepEqual(log.threads.map((th) => String(th.tid)), threads.map((th) => th[1]));
  for (const th of log.threads) {
    assert.equal(th.spans.length, 4 * KINDS * SPANS, 'every span of every chain, once "done"');
    const byId = new Map(th.spans.map((s) => [s.spanId, s]));
    assert.equal(byId.size, th.spans.length, 'unique span ids');
    assert.equal(new Set(th.spans.map((s) => s.kind)).size, KINDS, 'every resumption kind');
    assert.equal(th.pieces.length, 2 * th.spans.length);
    for (const p of th.pieces) {
      const s = byId.get(p.spanId);
      assert.ok(BigInt(s.start) <= BigInt(p.start) && BigInt(p.end) <= BigInt(s.end), 'a piece lies in its span\'s window');
    }
    // One burn per span after its end, in a context that still holds it, each way of outliving it.
    assert.equal(th.ended.length, th.spans.length);
    assert.deepEqual(new Set(th.ended.map((p) => p.how)), new Set(['same context', 'timer', 'bound function']));
    for (const p of th.ended) assert.ok(BigInt(byId.get(p.spanId).end) <= BigInt(p.start), 'an ended piece follows its span\'s end');
    // Interleaved: some span starts before the previous one of another chain has ended.
    const overlapping = th.spans.some((s, i) => i > 0 && BigInt(s.start) < BigInt(th.spans[i - 1].end ?? 0));
    assert.ok(overlapping, 'spans of different chains interleave');
  }
}

test('the interleaving fixture runs with schema tls', { timeout: 120_000 }, async (t) => checkLog(await runFixture(t, 'tls')));
test('the interleaving fixture runs with schema nodejs', { skip: skipNodejs, timeout: 120_000 }, async (t) => checkLog(await runFixture(t, 'nodejs')));
