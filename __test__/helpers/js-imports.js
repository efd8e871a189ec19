'use strict';
// The import graph of a folder of JavaScript files, read with a JavaScript parser (acorn), so that
// a require() written in a comment or a string is not an import, and one inside a function (a
// lazy require) is. Edges are the static relative specifiers of require(), import() and
// import/export ... from, resolved as Node resolves them.
const fs = require('node:fs');
const path = require('node:path');
const acorn = require('acorn');
const walk = require('acorn-walk');

const JS = /\.(c|m)?js$/;

/** Every JavaScript file under `dir`, sorted. */
function jsFiles(dir) {
  const files = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) files.push(...jsFiles(full));
    else if (entry.isFile() && JS.test(entry.name)) files.push(full);
  }
  return files.sort();
}

/** The string a specifier argument spells out, or null when it is computed at run time. */
function literal(node) {
  if (node === undefined || node === null) return null;
  if (node.type === 'Literal' && typeof node.value === 'string') return node.value;
  if (node.type === 'TemplateLiteral' && node.expressions.length === 0) return node.quasis[0].value.cooked;
  return null;
}

/** The module specifiers `file` names, with their lines. */
function specifiers(file) {
  const source = fs.readFileSync(file, 'utf8');
  const ast = acorn.parse(source, {
    ecmaVersion: 'latest',
    sourceType: file.endsWith('.mjs') ? 'module' : 'script',
    allowHashBang: true,
    locations: true,
  });
  const found = [];
  const add = (node, value) => { if (value !== null) found.push({ specifier: value, line: node.loc.start.line }); };
  walk.full(ast, (node) => {
    if (node.type === 'CallExpression' && node.callee.type === 'Identifier' && node.callee.name === 'require') {
      add(node, literal(node.arguments[0]));
    } else if (node.type === 'ImportExpression' || node.type === 'ImportDeclaration' ||
      node.type === 'ExportAllDeclaration' || (node.type === 'ExportNamedDeclaration' && node.source)) {
      add(node, literal(node.source));
    }
  });
  return found;
}

/** Node's resolution of a relative specifier from `file`: the file it loads, or null. */
function resolveRelative(file, specifier) {
  const target = path.resolve(path.dirname(file), specifier);
  const candidates = [target, ...['.js', '.json', '.node', '.cjs', '.mjs'].map((ext) => target + ext),
    path.join(target, 'index.js'), path.join(target, 'index.json'), path.join(target, 'index.node')];
  return candidates.find((c) => fs.existsSync(c) && fs.statSync(c).isFile()) ?? null;
}

/**
 * The graph of the JavaScript files under `dir`: file -> the files under `dir` it imports, and the
 * relative specifiers that name no file.
 */
function importGraph(dir) {
  const graph = new Map();
  const unresolved = [];
  const files = jsFiles(dir);
  for (const file of files) graph.set(file, new Set());
  for (const file of files) {
    for (const { specifier, line } of specifiers(file)) {
      if (!specifier.startsWith('./') && !specifier.startsWith('../')) continue;
      const target = resolveRelative(file, specifier);
      if (target === null) unresolved.push({ file, line, specifier });
      else if (graph.has(target)) graph.get(file).add(target);
    }
  }
  return { graph, unresolved };
}

/** The graph's strongly connected components of more than one file, or of one file importing itself (Tarjan). */
function stronglyConnected(graph) {
  let counter = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const components = [];
  const visit = (v) => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v), index.get(w)));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v).has(v)) components.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return components;
}

/**
 * One import cycle per strongly connected component, as the files in import order with the first
 * repeated at the end: the shortest cycle through the component's first file (breadth first).
 */
function importCycles(graph) {
  return stronglyConnected(graph).map((component) => {
    const members = new Set(component);
    const start = component[0];
    const previous = new Map();
    const queue = [start];
    while (queue.length > 0) {
      const v = queue.shift();
      for (const w of graph.get(v)) {
        if (!members.has(w)) continue;
        if (w === start) {
          const cycle = [start];
          for (let at = v; at !== start; at = previous.get(at)) cycle.splice(1, 0, at);
          return [...cycle, start];
        }
        if (!previous.has(w)) {
          previous.set(w, v);
          queue.push(w);
        }
      }
    }
    throw new Error(`no cycle through ${start} in its strongly connected component`);
  });
}

module.exports = { jsFiles, specifiers, importGraph, importCycles };
