// Torn-read test writer (not shipped): a worker flips its record between two span contexts A and
// B in a tight loop through the JS fast path (the package's thread writer: valid 0, ids and attrs,
// control word last), exactly the stores the context manager makes at every async switch. Every
// byte of A's ids, flags, attrs size and attrs-data differs from B's, so a sample that mixes
// them in any way cannot equal either. The main thread publishes nothing and idles.
// Prints "pid P", then one line for the worker:
//   "thread TID A_TRACE A_SPAN A_FLAGS RECORD_ADDRESS A_ATTRS_HEX B_TRACE B_SPAN B_FLAGS B_ATTRS_HEX"
// then "ready".
// Usage: node node_flipper.js PACKAGE_DIR
'use strict';
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');
const path = require('node:path');

const pkg = isMainThread ? process.argv[2] : workerData.pkg;

// Every header byte but valid differs between A and B: ids, flags, and both bytes of the attrs
// size (6 = 0x0006 vs 513 = 0x0201); the attrs-data differ from the first byte on.
const entry = (key, len, byte) => [key, len, ...new Array(len).fill(byte)];
const A = { traceId: '0123456789abcdef0123456789abcdef', spanId: '1032547698badcfe', traceFlags: 0x01,
  attrs: Uint8Array.from(entry(0, 4, 0x61)) };
const B = { traceId: 'fedcba9876543210fedcba9876543210', spanId: 'efcdab8967452301', traceFlags: 0x00,
  attrs: Uint8Array.from([...entry(1, 255, 0x62), ...entry(2, 254, 0x63)]) };

// About half the time in rewrites (valid 0), half on a valid record, measured on this kind of machine.
const WORK_BETWEEN_FLIPS = 100;

const hex = (bytes) => Buffer.from(bytes).toString('hex');
const describe = (c) => `${c.traceId} ${c.spanId} ${c.traceFlags.toString(16).padStart(2, '0')}`;

if (isMainThread) {
  const w = new Worker(__filename, { workerData: { pkg } });
  w.on('message', (line) => process.stdout.write(`pid ${process.pid}\n${line}\nready\n`));
  w.on('error', (e) => { console.error(e); process.exit(1); });
  w.on('exit', (code) => { console.error(`flipper worker exited (${code})`); process.exit(1); });
} else {
  const ctx = require(pkg);
  const { encodeEntry } = require(path.join(pkg, 'js', 'tls', 'entry-encoder'));
  const publisher = require(path.join(pkg, 'js', 'tls', 'thread-writer')).threadWriter();
  const entryA = encodeEntry(publisher, { ...A, isRemote: false }, A.attrs);
  const entryB = encodeEntry(publisher, { ...B, isRemote: false }, B.attrs);
  if (entryA <= 0 || entryB <= 0) throw new Error(`encodeEntry gave no entry (${entryA}, ${entryB})`);
  const info = ctx.threadInfo();
  if (info.error) throw new Error(`threadInfo().error: ${info.error}`);
  parentPort.postMessage(`thread ${info.tid} ${describe(A)} 0x${info.recordAddress.toString(16)} ${hex(A.attrs)} ` +
    `${describe(B)} ${hex(B.attrs)}`);
  // Between flips the thread computes for about as long as a flip takes, as code does between
  // async switches: samples then land both on valid records and in the middle of rewrites.
  const sink = new Int32Array(1);
  for (let x = 1; ; ) {
    publisher.publish(entryA);
    for (let i = 0; i < WORK_BETWEEN_FLIPS; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
    publisher.publish(entryB);
    for (let i = 0; i < WORK_BETWEEN_FLIPS; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
    sink[0] = x;
  }
}
