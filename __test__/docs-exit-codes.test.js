'use strict';
// The exit codes the docs state are the ones `thread-ctx --help` prints (the binary's own table,
// thread-ctx/cli/src/exit_codes.rs): docs/cli.md's table row for row, and every other "exits N" /
// "exit code N" in the README, CONTRIBUTING.md and docs/*.md by what its sentence or table row is
// about. That the binary exits with those codes in those cases is thread-ctx/cli/tests/cli_exits.rs's job.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const { ROOT, docFiles } = require('./helpers/docs');

const SHIM = path.join(ROOT, 'bin', 'thread-ctx.js');

/** `thread-ctx --help`'s exit-code table, through the package's command: code → meaning. */
function helpTable() {
  const help = execFileSync(process.execPath, [SHIM, '--help'], { encoding: 'utf8' });
  const start = help.indexOf('Exit codes:');
  assert.ok(start >= 0, `thread-ctx --help prints no "Exit codes:" table:\n${help}`);
  const table = new Map();
  for (const m of help.slice(start).matchAll(/^\s+(\d+)\s+(.+)$/gm)) table.set(Number(m[1]), m[2].trim());
  assert.ok(table.size >= 5, `expected the help's exit-code table, found ${[...table].join('; ')}`);
  return table;
}

/** Lower case, markup and punctuation dropped: how two wordings of one meaning are compared. */
const words = (s) => s.toLowerCase().replace(/[`*:;,.]/g, ' ').replace(/\s+/g, ' ').trim();
/** The help's meaning up to its parenthesis: the part every table must say. */
const gist = (meaning) => words(meaning.split('(')[0]);

/** Markdown lines outside fenced code, with their numbers. */
function proseLines(file) {
  let fenced = false;
  return fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n').map((text, i) => {
    if (text.startsWith('```')) fenced = !fenced;
    return { text: fenced || text.startsWith('```') ? '' : text, line: i + 1 };
  });
}

/** docs/cli.md's exit-code table: the rows `| N | meaning | e.g. |` under "## Exit codes". */
function cliTable() {
  const lines = proseLines('docs/cli.md').map((l) => l.text);
  const start = lines.indexOf('## Exit codes');
  assert.ok(start >= 0, 'docs/cli.md has no "## Exit codes" section');
  const rows = new Map();
  for (const text of lines.slice(start + 1)) {
    if (text.startsWith('## ')) break;
    const m = /^\| (\d+) \| ([^|]+) \|/.exec(text);
    if (m) rows.set(Number(m[1]), m[2].trim());
  }
  return rows;
}

// What a sentence or table row stating an exit code is about, and the help meaning that names its
// code; the first that matches decides. A statement none matches must still use a listed code.
const TOPICS = [
  { about: /without root|CAP_BPF|permission/i, meaning: /permission/ },
  { about: /malformed/i, meaning: /malformed/ },
  { about: /does not exist|no process \d/i, meaning: /does not exist/ },
  { about: /has no `?otel_thread_ctx_v1/i, meaning: /has no otel_thread_ctx_v1/ },
  { about: /without a prebuilt|no prebuilt|no binary fits/i, meaning: /reader failed/ }, // the shim: nothing to run
  { about: /SIGTERM|SIGINT|ends the recording early/i, meaning: /^success/ },
];

const LIST_ITEM = /^\s*(?:[-*]|\d+\.)\s/;

/** Every "exits N", "exit code N", "exit code is N" outside docs/cli.md's table, with its context. */
function statements() {
  const found = [];
  for (const file of docFiles()) {
    const lines = proseLines(file);
    lines.forEach(({ text, line }, i) => {
      if (file === 'docs/cli.md' && /^\| \d+ \|/.test(text)) return; // the table itself
      for (const m of text.matchAll(/\bexit(?:s| code| code is| status)\s+(\d+)\b/gi)) {
        // Context: the table row, or the sentence in the list item or paragraph of the line.
        let context = text;
        if (!text.startsWith('|')) {
          const continues = (l) => l.text.trim() !== '' && !l.text.startsWith('|') && !LIST_ITEM.test(l.text);
          let a = i;
          let b = i;
          while (a > 0 && !LIST_ITEM.test(lines[a].text) && continues(lines[a - 1])) a--;
          if (a > 0 && !LIST_ITEM.test(lines[a].text) && LIST_ITEM.test(lines[a - 1].text)) a--;
          while (b + 1 < lines.length && continues(lines[b + 1])) b++;
          const paragraph = lines.slice(a, b + 1).map((l) => l.text.trim()).join(' ');
          // The sentence that holds this statement (the match with what precedes it on its line).
          const anchor = text.slice(Math.max(0, m.index - 20), m.index + m[0].length).trim();
          context = paragraph.split(/(?<=[.!?])\s+(?=[A-Z`*(])/).find((s) => s.includes(anchor)) ?? paragraph;
        }
        found.push({ where: `${file}:${line}`, code: Number(m[1]), said: m[0], context });
      }
    });
  }
  return found;
}

test("docs/cli.md's exit-code table is thread-ctx --help's, row for row", () => {
  const help = helpTable();
  const docs = cliTable();
  assert.deepEqual([...docs.keys()], [...help.keys()], 'the same codes, in the same order');
  for (const [code, meaning] of help) {
    assert.ok(words(docs.get(code)).startsWith(gist(meaning)),
      `exit ${code}: docs/cli.md says "${docs.get(code)}", thread-ctx --help says "${meaning}"`);
  }
});

test('every exit code the docs state is the one --help gives for that case', () => {
  const help = helpTable();
  const codeMeaning = (re) => {
    const hits = [...help].filter(([, meaning]) => re.test(words(meaning)));
    assert.equal(hits.length, 1, `expected one --help exit code whose meaning matches ${re}, found ${JSON.stringify(hits)}`);
    return hits[0][0];
  };
  const all = statements();
  assert.ok(all.length >= 4, `expected the docs to state exit codes in several places, found ${all.length}`);
  const wrong = [];
  for (const s of all) {
    if (!help.has(s.code)) {
      wrong.push(`${s.where}: "${s.said}": --help lists no exit code ${s.code}`);
      continue;
    }
    const topic = TOPICS.find((t) => t.about.test(s.context));
    if (!topic) continue;
    const expected = codeMeaning(topic.meaning);
    if (s.code !== expected) {
      wrong.push(`${s.where}: "${s.said}" where --help gives ${expected} (${help.get(expected)}): ${s.context.slice(0, 200)}`);
    }
  }
  assert.deepEqual(wrong, [], wrong.join('\n'));
});
