'use strict';
// A copy of this node whose v8dbg_* symbols were renamed away (the bytes of their names changed in
// place: the dynamic symbol table cannot lose entries), named `node` in a temporary directory
// removed at exit: a build without V8's postmortem metadata. thread-ctx then takes its stacks with
// bpf_get_stack and names its JS frames from the perf map or jitdump, the fallback path, on the
// same Node as the heap path it is compared with.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

function nodeWithoutV8dbg() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'node-without-v8dbg-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const bytes = fs.readFileSync(process.execPath);
  const [from, to] = [Buffer.from('v8dbg_'), Buffer.from('v0dbg_')];
  let renamed = 0;
  for (let at = bytes.indexOf(from); at !== -1; at = bytes.indexOf(from, at + from.length)) {
    to.copy(bytes, at);
    renamed++;
  }
  if (renamed === 0) throw new Error(`${process.execPath} has no v8dbg_ symbols to rename`);
  const out = path.join(dir, 'node');
  fs.writeFileSync(out, bytes, { mode: 0o755 });
  return out;
}

module.exports = { nodeWithoutV8dbg };
