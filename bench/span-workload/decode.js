'use strict';
// The hex decode of span ids (js/tls/entry-encoder.js decodeHexId) against the other ways
// JavaScript has to turn 16 hex digits into bytes, in time: ns per id, each variant in its own
// process (pinned), rounds alternated, ratio to the package's decode per round. Ids come from the
// SDK's RandomIdGenerator, as in a service. What the per-span instruction counts cannot say: the
// table loop executes many cheap instructions (~500 per id, String#charCodeAt mostly), the others
// fewer but dearer ones.
//   node bench/span-workload/decode.js [--node 24] [--rounds 5] [--ids 4096] [--reps 500] [--cpu 0]

const path = require('node:path');
const { parseArgs } = require('node:util');
const { execFileSync } = require('node:child_process');
const { resolveNode, nodeVersion } = require('../lib/node-binary');
const { positiveInteger, cpuNumber } = require('../lib/args');
const { alternate } = require('../lib/rounds');
const { median, pairedRatio } = require('../lib/stats');
const { fixed, interval } = require('../lib/format');

const ROOT = path.join(__dirname, '..', '..');

// Each: (words, firstWord, hex, chars) => 1 valid, 0 all zero, -1 not `chars` hex digits.
function variants() {
  const { decodeHexId, BYTE } = require(path.join(ROOT, 'js', 'tls', 'entry-encoder'));
  const fromBytes = (words, firstWord, bytes, chars) => {
    let any = 0;
    for (let w = 0, at = 0; w < chars >> 3; w++, at += 8) {
      const b0 = BYTE[(bytes[at] << 8) | bytes[at + 1]], b1 = BYTE[(bytes[at + 2] << 8) | bytes[at + 3]];
      const b2 = BYTE[(bytes[at + 4] << 8) | bytes[at + 5]], b3 = BYTE[(bytes[at + 6] << 8) | bytes[at + 7]];
      if ((b0 | b1 | b2 | b3) < 0) return -1;
      const word = (b3 << 24) | (b2 << 16) | (b1 << 8) | b0;
      words[firstWord + w] = word;
      any |= word;
    }
    return any === 0 ? 0 : 1;
  };
  const scratch = Buffer.alloc(32);
  const encoder = new TextEncoder();
  return {
    // The package's: two char codes per table load.
    table: decodeHexId,
    // The string's bytes copied out by a native call, then the same table.
    latin1Write: (words, firstWord, hex, chars) => {
      if (typeof hex !== 'string' || hex.length !== chars) return -1;
      scratch.latin1Write(hex, 0, chars);
      return fromBytes(words, firstWord, scratch, chars);
    },
    encodeInto: (words, firstWord, hex, chars) => {
      if (typeof hex !== 'string' || hex.length !== chars) return -1;
      if (encoder.encodeInto(hex, scratch).written !== chars) return -1;
      return fromBytes(words, firstWord, scratch, chars);
    },
    // Eight digits at a time through the number parser (rejects non-hex as NaN).
    numberParse: (words, firstWord, hex, chars) => {
      if (typeof hex !== 'string' || hex.length !== chars) return -1;
      let any = 0;
      for (let w = 0, at = 0; w < chars >> 3; w++, at += 8) {
        const v = Number('0x' + hex.slice(at, at + 8));
        if (v !== v) return -1;
        const word = ((v & 0xff) << 24) | (((v >>> 8) & 0xff) << 16) | (((v >>> 16) & 0xff) << 8) | (v >>> 24);
        words[firstWord + w] = word;
        any |= word;
      }
      return any === 0 ? 0 : 1;
    },
  };
}

function child(variant, ids, reps) {
  const { RandomIdGenerator } = require('@opentelemetry/sdk-trace-base');
  const generator = new RandomIdGenerator();
  const hexIds = Array.from({ length: ids }, () => generator.generateSpanId());
  const all = variants();
  const decode = all[variant];
  if (decode === undefined) throw new TypeError(`--child: expected one of ${Object.keys(all).join(', ')}, got ${variant}`);
  const words = new Uint32Array(2);
  // The results are checked (every generated id is valid and nonzero), so nothing is optimised away.
  const run = (n) => {
    let valid = 0;
    for (let r = 0; r < n; r++) for (let i = 0; i < ids; i++) valid += decode(words, 0, hexIds[i], 16);
    if (valid !== n * ids) throw new Error(`${variant}: ${n * ids - valid} of ${n * ids} ids did not decode`);
  };
  run(Math.max(1, reps >> 2)); // warm-up: optimised before the window
  const start = process.hrtime.bigint();
  run(reps);
  return { nsPerId: Number(process.hrtime.bigint() - start) / (reps * ids) };
}

function main() {
  const { values } = parseArgs({
    options: {
      node: { type: 'string' }, rounds: { type: 'string', default: '5' }, ids: { type: 'string', default: '4096' },
      reps: { type: 'string', default: '500' }, cpu: { type: 'string', default: '0' }, child: { type: 'string' },
    },
  });
  const ids = positiveInteger('ids', values.ids);
  const reps = positiveInteger('reps', values.reps);
  if (values.child !== undefined) {
    process.stdout.write(JSON.stringify(child(values.child, ids, reps)) + '\n');
    return;
  }
  const nodeBin = resolveNode(values.node);
  const cpu = cpuNumber('cpu', values.cpu);
  const names = Object.keys(variants());
  return alternate({
    rounds: positiveInteger('rounds', values.rounds),
    modes: names,
    measure: (variant) => JSON.parse(execFileSync('taskset', ['-c', String(cpu), nodeBin, __filename, '--child', variant,
      '--ids', String(ids), '--reps', String(reps)], { encoding: 'utf8' })),
  }).then((samples) => {
    const lines = [`### Hex id decode, Node ${nodeVersion(nodeBin)} (16 digits per id, ${values.rounds} rounds, CPU ${cpu})`, '',
      '| variant | ns per id (median) | ÷ table, per round [95 %] |', '|---|---:|---|'];
    for (const name of names) {
      const ns = median(samples.filter((s) => s.mode === name).map((s) => s.nsPerId));
      lines.push(`| ${name} | ${fixed(ns, 1)} | ${name === 'table' ? '1' : interval(pairedRatio(samples, name, 'table', (s) => s.nsPerId))} |`);
    }
    lines.push('', `Command: \`node bench/span-workload/decode.js ${process.argv.slice(2).join(' ')}\``);
    process.stdout.write(lines.join('\n') + '\n');
  });
}

main();
