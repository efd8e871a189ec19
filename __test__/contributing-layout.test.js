'use strict';
// CONTRIBUTING.md's layout section lists every folder a newcomer has to find their way through:
// each top-level folder of the repository, each folder of js/ (js/tls/, js/nodejs/ ...), each
// Rust crate's folder and the module folders of its src/ (reader/src/discovery/ ...). The folders
// are read from the checkout as git sees it (tracked, or new and not ignored), so generated and
// ignored ones (node_modules/, target/, .node-versions/, dist/ ...) never count, and a folder added
// anywhere in those places fails here until the section says what it holds.
//
// A folder counts as listed when the section names it, or a file or folder inside it, by its path
// from the repository's root (`js/tls/`, `.ci/run`), or when a table row, list item or paragraph
// that names its top-level folder names the rest of its path (`tls/` in the `js/` row,
// `src/discovery/` in the `reader/` row).
//
// Files too, where a newcomer looks for one by name: each doc (docs/*.md), script (scripts/*),
// JS file of js/ and top-level module of a Rust crate (src/*.rs but lib.rs and main.rs). A file
// counts as listed when the section names its path, or when a row, item or paragraph that names
// one of its folders (`docs/`, `thread-ctx/otlp/`) names the file (`api.md`, `grpc.rs`).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const MarkdownIt = require('markdown-it');

const ROOT = path.join(__dirname, '..');
const SECTION = /layout/i;

/** Every folder of the checkout that holds a file git tracks or would track, as `a/b` paths. */
function checkoutFolders() {
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0').filter((f) => f !== '' && fs.existsSync(path.join(ROOT, f)));
  const folders = new Set();
  for (const file of files) {
    const parts = file.split('/');
    for (let n = 1; n < parts.length; n++) folders.add(parts.slice(0, n).join('/'));
  }
  return { files, folders };
}

/** The folders the layout section must list (see the top of this file). */
function foldersToList({ files, folders }) {
  const children = (parent) => [...folders].filter((f) => path.posix.dirname(f) === parent);
  const crates = files.filter((f) => path.posix.basename(f) === 'Cargo.toml').map((f) => path.posix.dirname(f));
  const wanted = new Set([...children('.'), ...children('js')]);
  for (const crate of crates) {
    if (crate !== '.') wanted.add(crate);
    for (const module of children(crate === '.' ? 'src' : `${crate}/src`)) wanted.add(module);
  }
  return [...wanted].sort();
}

/** The files the layout section must list by name (see the top of this file). */
function filesToList({ files }) {
  const crates = files.filter((f) => path.posix.basename(f) === 'Cargo.toml').map((f) => path.posix.dirname(f));
  const sources = new Set(crates.map((c) => (c === '.' ? 'src' : `${c}/src`)));
  return files.filter((f) => {
    const dir = path.posix.dirname(f);
    const name = path.posix.basename(f);
    return (dir === 'docs' && name.endsWith('.md')) || dir === 'scripts' || (within(dir, 'js') && name.endsWith('.js'))
      || (sources.has(dir) && name.endsWith('.rs') && name !== 'lib.rs' && name !== 'main.rs');
  }).sort();
}

/** The files of `wanted` that no span of `blocks` lists (see the top of this file). */
function unlistedFiles(wanted, blocks) {
  return wanted.filter((file) => !blocks.some((spans) => {
    const paths = spans.map(normalized).filter((p) => p !== '');
    if (paths.includes(file)) return true;
    const aboutItsFolder = paths.some((p) => p.includes('/') || !p.includes('.') ? within(file, p) : false);
    return aboutItsFolder && paths.some((p) => file.endsWith(`/${p}`));
  }));
}

/**
 * The code spans of the section whose level-2 heading matches SECTION (up to the next level-1 or
 * level-2 heading), grouped by table row, list item, or else paragraph: [[span, ...], ...].
 */
function layoutSection(markdown) {
  const tokens = new MarkdownIt({ html: true }).parse(markdown, {});
  const blocks = [];
  let inSection = false;
  let found = false;
  let open = 0; // depth inside the outermost table row or list item
  let block = null;
  tokens.forEach((token, i) => {
    if (token.type === 'heading_open' && (token.tag === 'h1' || token.tag === 'h2')) {
      inSection = token.tag === 'h2' && SECTION.test(tokens[i + 1].content);
      found ||= inSection;
      return;
    }
    if (!inSection) return;
    if (token.type === 'tr_open' || token.type === 'list_item_open') {
      if (open++ === 0) blocks.push(block = []);
    } else if (token.type === 'tr_close' || token.type === 'list_item_close') {
      if (--open === 0) block = null;
    } else if (token.type === 'inline') {
      const target = block ?? [];
      if (block === null) blocks.push(target);
      for (const child of token.children) if (child.type === 'code_inline') target.push(child.content);
    }
  });
  return found ? blocks : null;
}

const normalized = (span) => span.trim().replace(/^\.\//, '').replace(/\/+$/, '');
const within = (p, folder) => p === folder || p.startsWith(`${folder}/`);

/** The folders of `wanted` that no span of `blocks` lists (see the top of this file). */
function unlisted(wanted, blocks) {
  return wanted.filter((folder) => {
    const top = folder.split('/')[0];
    return !blocks.some((spans) => {
      const paths = spans.map(normalized).filter((p) => p !== '');
      if (paths.some((p) => within(p, folder))) return true;
      if (!paths.some((p) => within(p, top))) return false;
      return paths.some((p) => within(`${top}/${p}`, folder) || folder.endsWith(`/${p}`));
    });
  });
}

test("CONTRIBUTING.md's layout section lists every top-level, js/ and Rust source folder", () => {
  const checkout = checkoutFolders();
  const wanted = foldersToList(checkout);
  // What this checkout has without doubt: an empty or partial list would prove nothing.
  for (const folder of ['js', 'js/tls', 'js/nodejs', 'src', '__test__']) {
    assert.ok(wanted.includes(folder), `expected ${folder} among the folders to list, got ${wanted.join(' ')}`);
  }
  const blocks = layoutSection(fs.readFileSync(path.join(ROOT, 'CONTRIBUTING.md'), 'utf8'));
  assert.notEqual(blocks, null, 'CONTRIBUTING.md: no level-2 heading with "layout" in it');
  const missing = unlisted(wanted, blocks);
  assert.deepEqual(missing, [], `folders missing from CONTRIBUTING.md's layout section (say what each holds): ${missing.join(', ')}`);
});

test("CONTRIBUTING.md's layout section names every doc, script, JS file and Rust module", () => {
  const wanted = filesToList(checkoutFolders());
  for (const file of ['docs/api.md', 'docs/spanprofiles.md', 'docs/nodejs-schema.md', 'scripts/test.sh', 'js/index.js', 'src/page.rs', 'thread-ctx/otlp/src/grpc.rs']) {
    assert.ok(wanted.includes(file), `expected ${file} among the files to list, got ${wanted.join(' ')}`);
  }
  const blocks = layoutSection(fs.readFileSync(path.join(ROOT, 'CONTRIBUTING.md'), 'utf8'));
  const missing = unlistedFiles(wanted, blocks);
  assert.deepEqual(missing, [], `files missing from CONTRIBUTING.md's layout section (say what each holds): ${missing.join(', ')}`);
});

test('a file is listed by its path, or by its name beside one of its folders', () => {
  const blocks = layoutSection([
    '# Project', '', '## Layout', '',
    '| path | what |', '|---|---|',
    '| `docs/` | `api.md`, `cli.md` |',
    '| `thread-ctx-otlp` (`thread-ctx/otlp/`) | `encode.rs`, `grpc.rs` |',
    '| `scripts/test.sh` | the tests |', '',
    'Elsewhere `http.rs`.',
  ].join('\n'));
  const wanted = ['docs/api.md', 'docs/spanprofiles.md', 'thread-ctx/otlp/src/grpc.rs', 'thread-ctx/otlp/src/http.rs', 'scripts/test.sh', 'scripts/fuzz.sh'];
  assert.deepEqual(unlistedFiles(wanted, blocks), ['docs/spanprofiles.md', 'thread-ctx/otlp/src/http.rs', 'scripts/fuzz.sh']);
});

test('a folder is listed by its full path, or by the rest of its path beside its top-level folder', () => {
  const blocks = layoutSection([
    '# Project', '', '## Repository layout', '',
    '| path | what |', '|---|---|',
    '| `js/` | `tls/` (the writer), `nodejs/frame-writer.js` |',
    '| `reader/` | `src/discovery/` |',
    '| `.ci/run` | CI |', '',
    'Also `docs/api.md`, and `bench/` with `lib/`.', '',
    '## Development', '', '`js/manager/` here is outside the section.',
  ].join('\n'));
  const wanted = ['.ci', 'bench', 'bench/lib', 'docs', 'js', 'js/manager', 'js/nodejs', 'js/tls', 'reader/src/discovery', 'reader/src/cli', 'src/tls'];
  assert.deepEqual(unlisted(wanted, blocks), ['js/manager', 'reader/src/cli', 'src/tls']);
  assert.equal(layoutSection('# Project\n\n## Development\n\n`js/`\n'), null);
});
