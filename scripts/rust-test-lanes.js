#!/usr/bin/env node
// Runs the workspace's Rust test binaries (already built by `cargo test --no-run`) two at a time.
//
// Why: `cargo test` runs one test binary after another, and most of the slow ones spend their
// time waiting for the live processes they sample (a node under load, the Collector), not on the
// CPU: ~570 s one after the other in CI. Each binary is run as cargo runs it (its package's
// folder as the working directory, CARGO_MANIFEST_DIR set), its output printed whole
// when it ends, with cargo's own `Running` line before it, so the log reads as `cargo test`'s
// does and every binary's `test result:` line is there. All binaries run even when one fails
// (as `--no-fail-fast`); the exit code is 1 if any failed.
//
//   cargo test --release --workspace --no-run --message-format=json-render-diagnostics > BINS
//   node scripts/rust-test-lanes.js BINS            (RUST_TEST_LANES=1: one at a time)
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');

// The slowest binaries start first, so that no long one is left alone at the end (seconds each
// in a CI run of 2026-12-07, one after the other; any binary not listed starts after these).
const SLOW_FIRST = [
  'agent_collector', // 74 s
  'v8_names', // 60 s
  'v8_tiers', // 52 s
  'demo_run', // 51 s
  'live_names', // 50 s
  'interleaved_spans', // 45 s
  'agent_shared_map', // 24 s
  'live_tiers', // 19 s
  'alloc_record', // 17 s
];

function testBinaries(messagesFile) {
  const bins = [];
  for (const line of fs.readFileSync(messagesFile, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue;
    const m = JSON.parse(line);
    if (m.reason !== 'compiler-artifact' || !m.profile || !m.profile.test || !m.executable) continue;
    bins.push({
      name: m.target.name,
      kind: m.target.kind[0],
      src: m.target.src_path,
      exe: m.executable,
      manifestDir: path.dirname(m.manifest_path),
    });
  }
  const rank = (b) => {
    const i = SLOW_FIRST.indexOf(b.name);
    return i < 0 ? SLOW_FIRST.length : i;
  };
  return bins.sort((a, b) => rank(a) - rank(b) || a.exe.localeCompare(b.exe));
}

function runOne(bin, extraArgs) {
  return new Promise((resolve) => {
    const started = Date.now();
    const chunks = [];
    const child = spawn(bin.exe, extraArgs, {
      cwd: bin.manifestDir,
      env: { ...process.env, CARGO_MANIFEST_DIR: bin.manifestDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (d) => chunks.push(d));
    child.stderr.on('data', (d) => chunks.push(d));
    child.on('error', (err) => chunks.push(Buffer.from(`could not start ${bin.exe}: ${err.message}\n`)));
    child.on('close', (code, signal) => {
      const rel = path.relative(path.resolve(__dirname, '..'), bin.src);
      const exeRel = path.relative(path.resolve(__dirname, '..'), bin.exe);
      const what = bin.kind === 'test' ? rel : `unittests ${rel}`;
      process.stdout.write(`     Running ${what} (${exeRel})\n`);
      process.stdout.write(Buffer.concat(chunks));
      const secs = ((Date.now() - started) / 1000).toFixed(1);
      const ok = code === 0;
      if (!ok) {
        process.stdout.write(`error: test failed, to rerun pass \`--test ${bin.name}\` ` +
          `(${signal ? `signal ${signal}` : `exit code ${code}`}, ${secs} s)\n`);
      }
      resolve({ bin, ok, secs: Number(secs) });
    });
  });
}

async function main() {
  const [messagesFile, ...extraArgs] = process.argv.slice(2);
  if (!messagesFile) {
    console.error('usage: node scripts/rust-test-lanes.js CARGO_NO_RUN_JSON [TEST ARGS...]');
    process.exit(2);
  }
  const bins = testBinaries(messagesFile);
  if (bins.length === 0) {
    console.error(`no test binaries in ${messagesFile}: was it written by cargo test --no-run --message-format=json?`);
    process.exit(1);
  }
  const lanes = Math.max(1, Number(process.env.RUST_TEST_LANES || 2));
  const queue = bins.slice();
  const results = [];
  const t0 = Date.now();
  await Promise.all(Array.from({ length: lanes }, async () => {
    while (queue.length > 0) results.push(await runOne(queue.shift(), extraArgs));
  }));
  const failed = results.filter((r) => !r.ok);
  const wall = ((Date.now() - t0) / 1000).toFixed(0);
  const sum = results.reduce((s, r) => s + r.secs, 0).toFixed(0);
  console.log(`rust test binaries: ${results.length} run, ${failed.length} failed, ${lanes} at a time: ` +
    `${wall} s (${sum} s one after the other)`);
  for (const r of failed) console.log(`  failed: ${r.bin.name} (${path.relative(process.cwd(), r.bin.src)})`);
  process.exit(failed.length ? 1 : 0);
}

main();
