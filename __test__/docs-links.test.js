'use strict';
// Every relative link and #anchor in the README, CONTRIBUTING.md and docs/*.md resolves: the file
// (or directory) exists, and an anchor names a heading of the target, slugged as GitHub slugs it
// (github-slugger: lower case, punctuation dropped, spaces to hyphens, -1, -2 … for repeats).
// Links are read by a Markdown parser, so links in tables count and code does not.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const MarkdownIt = require('markdown-it');

const { ROOT, docFiles } = require('./helpers/docs');

const md = new MarkdownIt({ html: true });

/** The text GitHub slugs a heading from: its inline content without markup. */
function plainText(inline) {
  return inline.children.filter((t) => t.type === 'text' || t.type === 'code_inline').map((t) => t.content).join('');
}

function parse(file, GithubSlugger) {
  const tokens = md.parse(fs.readFileSync(path.join(ROOT, file), 'utf8'), {});
  const slugger = new GithubSlugger();
  const anchors = new Set();
  const links = [];
  tokens.forEach((token, i) => {
    if (token.type === 'heading_open') anchors.add(slugger.slug(plainText(tokens[i + 1])));
    if (token.type !== 'inline') return;
    for (const child of token.children) {
      const target = child.type === 'link_open' ? child.attrGet('href') : child.type === 'image' ? child.attrGet('src') : null;
      if (target !== null) links.push({ target, line: token.map ? token.map[0] + 1 : '?' });
    }
  });
  return { anchors, links };
}

test('relative links and anchors in the README, CONTRIBUTING.md and docs/ resolve', async () => {
  const { default: GithubSlugger } = await import('github-slugger');
  const parsed = new Map();
  const parsedFile = (file) => {
    if (!parsed.has(file)) parsed.set(file, parse(file, GithubSlugger));
    return parsed.get(file);
  };
  const broken = [];
  let checked = 0;
  for (const file of docFiles()) {
    for (const { target, line } of parsedFile(file).links) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: …: not this repository's
      checked++;
      const hash = target.indexOf('#');
      const filePart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
      const anchor = hash < 0 ? null : decodeURIComponent(target.slice(hash + 1));
      const resolved = filePart === '' ? file : path.normalize(path.join(path.dirname(file), filePart));
      const where = `${file}:${line}: ${target}`;
      if (resolved.startsWith('..') || !fs.existsSync(path.join(ROOT, resolved))) {
        broken.push(`${where}: ${resolved} does not exist`);
        continue;
      }
      if (anchor === null) continue;
      if (!resolved.endsWith('.md')) {
        if (!/^L\d+(-L\d+)?$/.test(anchor)) broken.push(`${where}: #${anchor} in a file that is not Markdown (only #L<line> works there)`);
        continue;
      }
      const { anchors } = parsedFile(resolved);
      if (!anchors.has(anchor)) {
        const near = [...anchors].filter((a) => a.split('-')[0] === anchor.split('-')[0]).slice(0, 5);
        broken.push(`${where}: ${resolved} has no heading #${anchor}${near.length ? ` (similar: ${near.map((a) => `#${a}`).join(', ')})` : ''}`);
      }
    }
  }
  assert.ok(checked >= 50, `expected the docs to link to each other, found only ${checked} relative links`);
  assert.deepEqual(broken, [], `broken links:\n${broken.join('\n')}`);
});

test('the README stays a landing page', () => {
  const lines = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n').length;
  assert.ok(lines <= 400, `README.md has ${lines} lines; reference material belongs in docs/ (at most 400)`);
});
