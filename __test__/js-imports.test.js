'use strict';
// The package's JS files import one another in one direction only: no import cycle between the
// files of js/ (a lazy require() inside a function counts), and every relative require() names a
// file that exists. The graph is read with a JavaScript parser (helpers/js-imports.js).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { importGraph, importCycles } = require('./helpers/js-imports');

const ROOT = path.join(__dirname, '..');
const JS_DIR = path.join(ROOT, 'js');
const named = (file) => path.relative(ROOT, file);

test('no import cycle between the files of js/', () => {
  const { graph } = importGraph(JS_DIR);
  const edges = [...graph.values()].reduce((n, targets) => n + targets.size, 0);
  // The entry point alone imports more than five files: an empty graph would prove nothing.
  assert.ok(graph.size >= 20 && graph.get(path.join(JS_DIR, 'index.js')).size > 5,
    `expected the package's import graph, read ${graph.size} files and ${edges} imports`);
  const cycles = importCycles(graph).map((cycle) => cycle.map(named).join(' -> '));
  assert.deepEqual(cycles, [], `import cycles in js/ (each a chain of require()s back to its first file):\n${cycles.join('\n')}`);
});

// The folders by concern (js/tls/, js/nodejs/, js/manager/ ...) are layers: a folder that imported
// one importing it back would be one concern split in two. Files directly in js/ (the entry point,
// the shared helpers) are not a folder of their own here.
test('no import cycle between the folders of js/', () => {
  const { graph } = importGraph(JS_DIR);
  const folderOf = (file) => path.relative(JS_DIR, path.dirname(file));
  const folders = new Map();
  const imports = new Map(); // 'from -> to' of folders: the file imports behind it
  for (const [file, targets] of graph) {
    if (folderOf(file) === '') continue;
    if (!folders.has(folderOf(file))) folders.set(folderOf(file), new Set());
    for (const target of targets) {
      const [from, to] = [folderOf(file), folderOf(target)];
      if (to === '' || to === from) continue;
      folders.get(from).add(to);
      const key = `${from} -> ${to}`;
      if (!imports.has(key)) imports.set(key, []);
      imports.get(key).push(`${named(file)} imports ${named(target)}`);
    }
  }
  assert.ok(folders.size >= 4, `expected js/ to hold its folders by concern, found ${[...folders.keys()].join(', ')}`);
  for (const [, targets] of folders) for (const to of targets) if (!folders.has(to)) folders.set(to, new Set());
  const cycles = importCycles(folders).map((cycle) => `js/${cycle.join(' -> js/')}: ` +
    cycle.slice(1).map((to, i) => imports.get(`${cycle[i]} -> ${to}`).join(', ')).join('; '));
  assert.deepEqual(cycles, [], `folders of js/ that import each other:\n${cycles.join('\n')}`);
});

test('every relative require() in js/ names a file that exists', () => {
  const { unresolved } = importGraph(JS_DIR);
  assert.deepEqual(unresolved.map((u) => `${named(u.file)}:${u.line}: ${u.specifier}`), []);
});

test('the graph reads require() as code, and a cycle is named by its files', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'js-imports-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (file, text) => {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  };
  write('a.js', "'use strict';\nfunction later() { return require('./b'); }\nmodule.exports = { later };\n");
  write('b.js', "const c = require(`./sub/c.js`);\n");
  write('sub/c.js', "module.exports = require('../a');\n");
  write('d.js', "// require('./a') in a comment\nconst s = \"require('./b')\";\nrequire('./sub');\nrequire('./e');\n");
  write('sub/index.js', "require('node:fs');\nrequire(process.env.X);\n");
  write('self.mjs', "import './self.mjs';\nexport * from './d.js';\n");

  const { graph, unresolved } = importGraph(dir);
  const at = (file) => path.join(dir, file);
  assert.deepEqual([...graph.get(at('d.js'))], [at('sub/index.js')], 'comments and strings are not imports; a folder loads its index.js');
  assert.deepEqual(unresolved.map((u) => [path.relative(dir, u.file), u.line, u.specifier]), [['d.js', 4, './e']]);
  const cycles = importCycles(graph).map((cycle) => cycle.map((f) => path.relative(dir, f)));
  assert.deepEqual(cycles, [['a.js', 'b.js', 'sub/c.js', 'a.js'], ['self.mjs', 'self.mjs']]);
});
