'use strict';
// Prototype variants of the package for benchmarks, without touching the working tree: a copy of
// the package's JS layer in a temporary directory with one patch from bench/prototypes/ applied
// (git apply), the compiled addon and node_modules linked in. A patch that no longer applies
// (js/ moved on) is reported by name; the benchmark skips that mode and says so.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const ROOT = path.join(__dirname, '..', '..');
const PROTOTYPES = path.join(ROOT, 'bench', 'prototypes');
const COPIED = ['js', 'package.json', 'index.d.ts'];
const LINKED = ['otel-thread-ctx.linux-x64-gnu.node', 'node_modules'];

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
  for (const entry of COPIED) fs.cpSync(path.join(ROOT, entry), path.join(dir, entry), { recursive: true });
  for (const entry of LINKED) fs.symlinkSync(path.join(ROOT, entry), path.join(dir, entry));
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
 * The package directory of each mode: the working tree, or a patched copy in `parentDir`.
 * @param patchesOf (mode) => the mode's patch names ([] or undefined: the working tree)
 * @returns { dirs: Map(mode -> dir), skipped: [{ mode, error }] } (modes whose patch does not apply)
 */
function packagesFor(modes, patchesOf, parentDir) {
  const dirs = new Map();
  const skipped = [];
  for (const mode of modes) {
    const patches = patchesOf(mode) ?? [];
    if (patches.length === 0) {
      dirs.set(mode, ROOT);
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

module.exports = { ROOT, patchedPackage, packagesFor, packagesOrThrow, copiesDirectory };
