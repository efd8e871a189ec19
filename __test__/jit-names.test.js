'use strict';
// enableJitNames() (js/profiling/jit-names.js) in real Node processes, each started with the flags
// under test: what it reports, the interpreter trampolines it makes V8 log for code compiled
// afterwards (read from the perf map V8 wrote), its one warning, the perf map removed at exit, bad
// options.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { enableJitNames, checkJitNamesOptions } = require('../js/profiling/jit-names');

const PKG = path.join(__dirname, '..');

// Runs `body` in a fresh node with `flags`; the child prints its pid and enableJitNames' result.
function run(flags, body, env = {}, cwd = undefined) {
  const script = `
    const { enableJitNames } = require(${JSON.stringify(path.join(PKG, 'js/profiling/jit-names.js'))});
    ${body}
  `;
  const r = spawnSync(process.execPath, [...flags, '-e', script], { encoding: 'utf8', cwd, env: { ...process.env, NODE_OPTIONS: '', ...env } });
  assert.strictEqual(r.status, 0, `node ${flags.join(' ')} failed: ${r.stderr}`);
  const [pid, json] = r.stdout.trim().split('\n');
  return { pid: Number(pid), result: JSON.parse(json), stderr: r.stderr };
}

// Two functions of different bodies compiled after enableJitNames(), run in the interpreter a few
// times.
const LATER = `
  const result = enableJitNames(OPTIONS);
  function compiledLater(n) { let s = 0; for (let i = 0; i < n; i++) s = (s * 31 + i) | 0; return s; }
  function alsoCompiledLater(text) { return text.split(',').map((w) => w.trim().toUpperCase()).join('|'); }
  for (let k = 0; k < 3; k++) { compiledLater(10); alsoCompiledLater('a, b, c'); }
  console.log(process.pid); console.log(JSON.stringify(result));
`;

/** The perf map's entries of `pid` (deleted once read): { size, tier, name } each. */
function perfMapEntries(pid) {
  const file = `/tmp/perf-${pid}.map`;
  try {
    // "ADDRESS SIZE JS:~name file:line:column" (Node 18: "LazyCompile:~name"): `~` the interpreter
    // (its bytecode, or a copy of its entry trampoline), `^` Sparkplug, `+` Maglev, `*` TurboFan.
    return fs.readFileSync(file, 'utf8').split('\n').map((l) => l.match(/^[0-9a-f]+ ([0-9a-f]+) [A-Za-z]+:([~^+*]?)([^ ]+)/))
      .filter(Boolean).map(([, size, tier, name]) => ({ size: parseInt(size, 16), tier, name }));
  } finally {
    fs.rmSync(file, { force: true });
  }
}

/** Sizes of the interpreter-tier entries of each function in `names`. */
function interpreterSizes(entries, names) {
  return names.map((name) => entries.filter((e) => e.name === name && e.tier === '~').map((e) => e.size));
}

test('with a perf map, code compiled afterwards gets its own interpreter trampoline, named', () => {
  const on = run(['--perf-basic-prof-only-functions'], LATER.replace('OPTIONS', 'true'));
  assert.deepStrictEqual([on.result.perfMap, on.result.jitdump, on.result.interpretedFrames, on.result.problems], [true, false, true, []]);
  assert.strictEqual(on.result.perfMapPath, `/tmp/perf-${on.pid}.map`);
  const off = run(['--perf-basic-prof-only-functions'], LATER.replace('OPTIONS', '{ interpretedFrames: false }'));
  assert.strictEqual(off.result.interpretedFrames, false);
  // V8 logs each function's bytecode either way, and may compile a tier in the background (a
  // Sparkplug or Maglev entry, or none: Node 26 logged one in one run in two), so the count of a
  // function's entries says nothing. What the option adds is a copy of the interpreter's entry
  // trampoline per function: one interpreter-tier entry each, of the one size every copy has (two
  // bodies of different sizes tell it from bytecode), that the run without the option lacks.
  const names = ['compiledLater', 'alsoCompiledLater'];
  const onEntries = perfMapEntries(on.pid);
  const offEntries = perfMapEntries(off.pid);
  const [first, second] = interpreterSizes(onEntries, names);
  const trampolineSizes = first.filter((size) => second.includes(size));
  const shown = JSON.stringify({ with: onEntries.filter((e) => names.includes(e.name)), without: offEntries.filter((e) => names.includes(e.name)) });
  assert.strictEqual(trampolineSizes.length, 1, `one trampoline copy of the same size for each function: ${shown}`);
  for (const sizes of interpreterSizes(onEntries, names)) {
    assert.strictEqual(sizes.filter((size) => size === trampolineSizes[0]).length, 1, `each function's own copy: ${shown}`);
  }
  for (const sizes of interpreterSizes(offEntries, names)) {
    assert.ok(sizes.length >= 1 && !sizes.includes(trampolineSizes[0]), `without the option: bytecode, no trampoline copy: ${shown}`);
  }
});

test('without a perf map or jitdump: one warning, nothing set', () => {
  const r = run([], `
    enableJitNames(); enableJitNames();
    console.log(process.pid); console.log(JSON.stringify(enableJitNames({ warn: true })));
  `);
  assert.deepStrictEqual([r.result.perfMap, r.result.jitdump, r.result.interpretedFrames], [false, false, false]);
  assert.strictEqual(r.stderr.match(/OTEL_THREAD_CTX_NO_JIT_NAMES/g).length, 1, r.stderr);
  assert.match(r.stderr, /--perf-basic-prof-only-functions/);
});

test('flags from NODE_OPTIONS count, and the perf map is removed at exit when asked', () => {
  const r = run([], LATER.replace('OPTIONS', '{ removePerfMapOnExit: true }'), { NODE_OPTIONS: '--perf-basic-prof-only-functions' });
  assert.strictEqual(r.result.perfMap, true);
  assert.strictEqual(fs.existsSync(`/tmp/perf-${r.pid}.map`), false, 'deleted when the process exited');
  // --perf-prof writes into the working directory (Node 22+ also take --perf-prof-path).
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'jit-names-'));
  try {
    const jd = run(['--perf-prof'], LATER.replace('OPTIONS', '{ warn: false }'), {}, dir);
    assert.strictEqual(jd.result.jitdumpPath, path.join(dir, `jit-${jd.pid}.dump`));
    assert.ok(fs.existsSync(jd.result.jitdumpPath), 'V8 wrote the jitdump where reported');
    assert.strictEqual(jd.result.interpretedFrames, true);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('bad options are TypeErrors naming the option', () => {
  assert.throws(() => enableJitNames(5), { name: 'TypeError', message: 'options: expected a boolean or an object, got number 5' });
  assert.deepStrictEqual(enableJitNames(false).problems, [], 'false: nothing done, the status returned');
  assert.throws(() => enableJitNames({ removeOnExit: true }), { name: 'TypeError', message: /options.removeOnExit: unknown option \(expected warn, interpretedFrames, removePerfMapOnExit\)/ });
  assert.throws(() => enableJitNames({ warn: 'yes' }), { name: 'TypeError', message: 'options.warn: expected a boolean, got string "yes"' });
  assert.throws(() => checkJitNamesOptions([], 'options.jitNames'), { name: 'TypeError', message: 'options.jitNames: expected a boolean or an object, got an array' });
});
