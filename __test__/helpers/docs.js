'use strict';
// The project's Markdown documentation, as paths relative to the checkout: the README,
// CONTRIBUTING.md and every docs/*.md.
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..', '..');

function docFiles() {
  const docs = fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`);
  return ['README.md', 'CONTRIBUTING.md', ...docs];
}

module.exports = { ROOT, docFiles };
