'use strict';
// Which package the benchmarks measure, and prototype variants of it, without touching the working
// tree. The package is the working tree, or, with OTEL_THREAD_CTX_BENCH_REV=REV in the
// environment, the JS layer of git revision REV (e.g. the commit before a change, to measure it
// with the same benchmark code): extracted once into the temporary directory, with this tree's
// compiled addon and node_modules linked in. A prototype is a copy of the package's JS layer with
// one patch from bench/prototypes/ applied (git apply); a patch that no longer applies (js/ moved
// on) is reported by name, and the benchmark skips that mode and says so.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const ROOT = path.join(__dirname, '..', '..');
const PROTOTYPES = path.join(ROOT, 'bench', 'prototypes');
const COPIED = ['js', 'package.json', 'index.d.ts'];
const LINKED = ['otel-thread-ctx.linux-x64-gnu.node', 'node_modules'];
// The addon's file name before the platform-package layout: the js/ of an older revision
// (rev:REV, OTEL_THREAD_CTX_BENCH_REV) loads it under that name.
const ADDON = 'otel-thread-ctx.linux-x64-gnu.node';
const OLD_ADDON_NAME = 'otel-thread-ctx.node';

function linkBuilt(dir) {
  for (const entry of LINKED) fs.symlinkSync(path.join(ROOT, entry), path.join(dir, entry));
  fs.symlinkSync(path.join(ROOT, ADDON), path.join(dir, OLD_ADDON_NAME));
}

// The V8 part of schema 'nodejs' of that revision, built from its own sources with this checkout's
// Node headers (.node-versions), where the revision has one: its js/ and its addon change together.
function buildV8AddonAt(commit, dir) {
  const sources = ['v8-addon', 'scripts/build-v8-addon.sh'];
  const listed = execFileSync('git', ['ls-tree', '--name-only', commit, ...sources], { cwd: ROOT, encoding: 'utf8' }).trim().split('\n');
  if (listed.length !== sources.length) return;
  const archive = execFileSync('git', ['archive', commit, ...sources], { cwd: ROOT, maxBuffer: 1 << 28 });
  execFileSync('tar', ['-x', '-C', dir], { input: archive });
  fs.symlinkSync(path.join(ROOT, '.node-versions'), path.join(dir, '.node-versions'));
  execFileSync('bash', ['scripts/build-v8-addon.sh'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
}

// The package at git revision `rev` (its js/, package.json, index.d.ts), extracted once per commit.
function packageAtRevision(rev) {
  let commit;
  try {
    commit = execFileSync('git', ['rev-parse', '--verify', `${rev}^{commit}`], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch {
    throw new TypeError(`OTEL_THREAD_CTX_BENCH_REV or rev:REV: expected a git revision of this repository, got ${JSON.stringify(rev)}`);
  }
  // Per checkout too: the copy links this checkout's addon and node_modules (a copy made from a
  // worktree since removed would load nothing).
  const checkout = require('node:crypto').createHash('sha256').update(ROOT).digest('hex').slice(0, 8);
  const dir = path.join(os.tmpdir(), `otel-thread-ctx-bench-rev-${commit.slice(0, 12)}-${checkout}`);
  if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
  const staging = fs.mkdtempSync(`${dir}.staging-`);
  const archive = execFileSync('git', ['archive', commit, ...COPIED], { cwd: ROOT, maxBuffer: 1 << 28 });
  execFileSync('tar', ['-x', '-C', staging], { input: archive });
  linkBuilt(staging);
  buildV8AddonAt(commit, staging);
  try {
    fs.renameSync(staging, dir);
  } catch (err) {
    fs.rmSync(staging, { recursive: true, force: true }); // another process extracted it first
    if (!fs.existsSync(path.join(dir, 'package.json'))) throw err;
  }
  return dir;
}

const REVISION = process.env.OTEL_THREAD_CTX_BENCH_REV || null;
/** The package directory measured: the working tree, or OTEL_THREAD_CTX_BENCH_REV's copy. */
const PACKAGE_DIR = REVISION === null ? ROOT : packageAtRevision(REVISION);

function shortCommit(rev) {
  return execFileSync('git', ['rev-parse', '--short', `${rev}^{commit}`], { cwd: ROOT, encoding: 'utf8' }).trim();
}

/** How a report writes the command that reproduces it (`line`: the command without the environment). */
function commandLine(line) {
  return REVISION === null ? line : `OTEL_THREAD_CTX_BENCH_REV=${shortCommit(REVISION)} ${line}`;
}

/** What the reports name as the code measured. */
function measuredRevision(codeRevision) {
  if (REVISION === null) return codeRevision(ROOT);
  return `js/ of ${shortCommit(REVISION)} (OTEL_THREAD_CTX_BENCH_REV), addon and benchmarks of ${codeRevision(ROOT)}`;
}

function patchPath(name) {
  const file = path.join(PROTOTYPES, `${name}.patch`);
  if (!fs.existsSync(file)) {
    const known = fs.existsSync(PROTOTYPES) ? fs.readdirSync(PROTOTYPES).filter((f) => f.endsWith('.patch')) : [];
    throw new TypeError(`prototype: expected one of ${known.map((f) => f.replace(/\.patch$/, '')).join(', ') || '(none)'}, got ${JSON.stringify(name)}`);
  }
  return file;
}

/**
 * Makes a patched copy of the package. Returns { dir, error }: dir is the package directory to
 * require(), or null with `error` saying why the patch did not apply.
 * @param names patches (without .patch) applied in order
 */
function patchedPackage(names, parentDir) {
  const dir = fs.mkdtempSync(path.join(parentDir, `${names.join('+')}-`));
  for (const entry of COPIED) fs.cpSync(path.join(PACKAGE_DIR, entry), path.join(dir, entry), { recursive: true });
  linkBuilt(dir);
  for (const name of names) {
    try {
      execFileSync('git', ['apply', '--whitespace=nowarn', patchPath(name)], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (err) {
      if (err instanceof TypeError) throw err;
      return { dir: null, error: `bench/prototypes/${name}.patch does not apply to this js/: ${String(err.stderr).trim().split('\n')[0]}` };
    }
  }
  return { dir, error: null };
}

/**
 * The package directory of each mode: the working tree, a patched copy in `parentDir`, or the JS
 * layer of another git revision (a before/after pair measured in one run, alternated).
 * @param patchesOf (mode) => the mode's patch names ([] or undefined: the working tree), or
 *   { patches, revision } (revision: a git revision whose js/ the mode measures instead)
 * @returns { dirs: Map(mode -> dir), skipped: [{ mode, error }] } (modes whose patch does not apply)
 */
function packagesFor(modes, patchesOf, parentDir) {
  const dirs = new Map();
  const skipped = [];
  for (const mode of modes) {
    const spec = patchesOf(mode);
    if (spec != null && !Array.isArray(spec) && spec.revision != null) {
      dirs.set(mode, packageAtRevision(spec.revision));
      continue;
    }
    const patches = (Array.isArray(spec) ? spec : spec?.patches) ?? [];
    if (patches.length === 0) {
      dirs.set(mode, PACKAGE_DIR);
      continue;
    }
    const { dir, error } = patchedPackage(patches, parentDir);
    if (dir === null) skipped.push({ mode, error });
    else dirs.set(mode, dir);
  }
  return { dirs, skipped };
}

/** Like packagesFor, but a patch that does not apply is an error. */
function packagesOrThrow(modes, patchesOf, parentDir) {
  const { dirs, skipped } = packagesFor(modes, patchesOf, parentDir);
  if (skipped.length > 0) throw new Error(skipped.map((s) => s.error).join('; '));
  return dirs;
}

/** A temporary directory for the copies of one benchmark run; remove() deletes it. */
function copiesDirectory() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'otel-thread-ctx-bench-'));
  return { dir, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

module.exports = { ROOT, PACKAGE_DIR, commandLine, measuredRevision, patchedPackage, packagesFor, packagesOrThrow, copiesDirectory };
