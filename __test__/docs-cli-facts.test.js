'use strict';
// What the docs say of the `thread-ctx` binary is what the binary is: every flag a command's
// `--help` lists is in that command's row of docs/cli.md's command table (or, where the row ends
// in "…", in one of the option tables below it), and the glibc the docs say the binary needs is
// the newest GLIBC_ version its dynamic symbols ask for (objdump, binutils). The binary is the
// checkout's release build (scripts/setup.sh builds it), through the package's command.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const { ROOT } = require('./helpers/docs');

const SHIM = path.join(ROOT, 'bin', 'thread-ctx.js');
const BINARY = path.join(ROOT, 'target', 'release', 'thread-ctx');
const COMMANDS = ['inspect', 'dump', 'validate', 'record', 'flamegraph', 'agent', 'report'];

const read = (file) => fs.readFileSync(path.join(ROOT, file), 'utf8');

/** The flags `thread-ctx CMD --help` lists (not --help itself): each as its long and short names. */
function helpFlags(command) {
  const help = execFileSync(process.execPath, [SHIM, command, '--help'], { encoding: 'utf8' });
  const flags = [...help.matchAll(/^\s+(?:(-\w), )?(--[a-z][a-z0-9-]*)/gm)]
    .map((m) => ({ long: m[2], short: m[1] }))
    .filter((f) => f.long !== '--help');
  assert.ok(flags.length > 0, `thread-ctx ${command} --help lists no flag:\n${help}`);
  return flags;
}

/** Whether `text` names `flag` as a whole flag (not as the start of a longer one). */
const names = (text, flag) => new RegExp(`(?<![a-z0-9-])${flag}(?![a-z0-9-])`).test(text);

test("every flag of every command is in docs/cli.md's command table", () => {
  const lines = read('docs/cli.md').split('\n');
  const optionRows = lines.filter((l) => l.startsWith('| `--')).join('\n');
  const missing = [];
  for (const command of COMMANDS) {
    // A command may have several rows, one per way to use it (report --otlp, report --traces).
    const rows = lines.filter((l) => l.startsWith(`| \`thread-ctx ${command} `));
    assert.ok(rows.length > 0, `docs/cli.md's command table has no row for thread-ctx ${command}`);
    const usage = rows.map((row) => row.split(/(?<!\\)\|/)[1]).join(' '); // first cells (an escaped \| is inside one)
    for (const { long, short } of helpFlags(command)) {
      if (names(usage, long) || (short && names(usage, short))) continue;
      if (usage.includes('…') && names(optionRows, long)) continue;
      missing.push(`thread-ctx ${command} ${long}`);
    }
  }
  assert.deepEqual(missing, [], `flags --help lists that docs/cli.md's command table does not:\n${missing.join('\n')}`);
});

test('the glibc the docs say the binary needs is the one it asks for', () => {
  assert.ok(fs.existsSync(BINARY), `${BINARY} is missing: run scripts/setup.sh (it builds the release binary)`);
  const versions = execFileSync('objdump', ['-T', BINARY], { encoding: 'utf8' }).match(/GLIBC_[0-9.]+/g) ?? [];
  const newest = versions.map((v) => v.slice('GLIBC_'.length)).sort((a, b) => a.localeCompare(b, 'en', { numeric: true })).pop();
  assert.ok(newest, `objdump -T ${BINARY} shows no GLIBC_ version`);
  // The statements of what the shipped binaries need: the README's requirements, the agent's.
  const said = [
    ['README.md', /reader for Linux x86-64 with glibc ≥ ([0-9.]+)/],
    ['docs/agent.md', /binary links only glibc ([0-9.]+) or newer/],
  ];
  for (const [file, pattern] of said) {
    const m = pattern.exec(read(file).replace(/\s+/g, ' '));
    assert.ok(m, `${file} no longer says which glibc the binary needs (${pattern})`);
    assert.equal(m[1], newest, `${file} says glibc ${m[1]}, the binary asks for GLIBC_${newest}`);
  }
});
