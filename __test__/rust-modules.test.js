'use strict';
// No import cycle between the top-level modules of any Rust crate of the workspace: between crates
// cargo refuses one, inside a crate nothing would. A module's edges are the `crate::NAME` paths in
// its files (and `super::NAME` in a top-level file, where super is the crate root), doc links
// included: a doc that needs the other module to make sense is a dependency too.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');

function crateSources() {
  const dirs = [path.join(root, 'src')];
  for (const name of fs.readdirSync(path.join(root, 'thread-ctx'))) {
    const src = path.join(root, 'thread-ctx', name, 'src');
    if (fs.existsSync(src)) dirs.push(src);
  }
  return dirs;
}

function rustFiles(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return rustFiles(p);
    return e.name.endsWith('.rs') ? [p] : [];
  });
}

/** The crate's top-level modules, each with its files. */
function modulesOf(src) {
  const mods = new Map();
  for (const e of fs.readdirSync(src, { withFileTypes: true })) {
    if (e.isDirectory()) {
      const files = rustFiles(path.join(src, e.name));
      if (files.length > 0) mods.set(e.name, files);
    } else if (e.name.endsWith('.rs') && e.name !== 'lib.rs' && e.name !== 'main.rs') {
      mods.set(e.name.slice(0, -3), [path.join(src, e.name)]);
    }
  }
  return mods;
}

/**
 * The first module of every path `text` names under `prefix::` (`crate` or `super`): `prefix::a`
 * and each item of a group, `prefix::{a::X, b, c::{Y, Z}}` naming a, b and c.
 */
function namesUnder(text, prefix) {
  const names = [];
  const re = new RegExp(`\\b${prefix}::\\s*(\\{|[a-z_0-9]+)`, 'g');
  for (const m of text.matchAll(re)) {
    if (m[1] !== '{') {
      names.push(m[1]);
      continue;
    }
    // The group's items, split at its own commas (a nested group is one item).
    let depth = 0;
    let item = '';
    for (let i = m.index + m[0].length; i < text.length; i++) {
      const c = text[i];
      if (c === '{') depth++;
      if ((c === ',' && depth === 0) || (c === '}' && depth === 0)) {
        const first = item.trim().match(/^[a-z_0-9]+/);
        if (first && first[0] !== 'self') names.push(first[0]);
        item = '';
        if (c === '}') break;
        continue;
      }
      if (c === '}') depth--;
      item += c;
    }
  }
  return names;
}

function edgesOf(src, mods) {
  const edges = new Map([...mods.keys()].map((m) => [m, new Set()]));
  for (const [m, files] of mods) {
    for (const f of files) {
      const text = fs.readFileSync(f, 'utf8');
      const topLevel = path.dirname(f) === src || (path.basename(f) === 'mod.rs' && path.dirname(path.dirname(f)) === src);
      const names = namesUnder(text, 'crate');
      if (topLevel) names.push(...namesUnder(text, 'super'));
      for (const n of names) if (n !== m && mods.has(n)) edges.get(m).add(n);
    }
  }
  return edges;
}

/** One cycle (as a list of modules) when the graph has one. */
function findCycle(edges) {
  const state = new Map();
  const stack = [];
  const visit = (m) => {
    state.set(m, 'open');
    stack.push(m);
    for (const n of edges.get(m)) {
      if (state.get(n) === 'open') return [...stack.slice(stack.indexOf(n)), n];
      if (!state.has(n)) {
        const c = visit(n);
        if (c) return c;
      }
    }
    stack.pop();
    state.set(m, 'done');
    return null;
  };
  for (const m of edges.keys()) {
    if (!state.has(m)) {
      const c = visit(m);
      if (c) return c;
    }
  }
  return null;
}

test('no Rust crate has an import cycle between its top-level modules', () => {
  const crates = crateSources();
  assert.ok(crates.length >= 8, `expected the addon and the thread-ctx crates, found ${crates.join(', ')}`);
  for (const src of crates) {
    const cycle = findCycle(edgesOf(src, modulesOf(src)));
    assert.strictEqual(cycle, null, `${path.relative(root, src)}: modules import each other in a cycle: ${cycle && cycle.join(' -> ')}`);
  }
});

test('paths in a use group are edges too', () => {
  const text = 'use super::{grpc::GrpcTransport, http::{HttpTransport, body}};\nuse crate::{self as me, a};\n// see crate::d';
  assert.deepStrictEqual(namesUnder(text, 'super'), ['grpc', 'http']);
  assert.deepStrictEqual(namesUnder(text, 'crate'), ['a', 'd']);
});

test('the cycle check finds a cycle', () => {
  const edges = new Map([['a', new Set(['b'])], ['b', new Set(['c'])], ['c', new Set(['a'])], ['d', new Set()]]);
  assert.deepStrictEqual(findCycle(edges), ['a', 'b', 'c', 'a']);
  assert.strictEqual(findCycle(new Map([['a', new Set(['b'])], ['b', new Set()]])), null);
});
