'use strict';
// A child Node process for tests that read it from outside: it runs `body` with `lib` (the
// package), `pc` (js/process-context/process-context.js), `say(obj)` (one JSON line to stdout) and
// `onLine(fn)` (stdin commands), then stays alive until the test ends. `child.next()` resolves with
// its next JSON line; `child.send(line)` writes a command; a child that exits rejects what is
// pending.

const path = require('node:path');
const { spawn } = require('node:child_process');
const { ROOT } = require('./addon');

function startChild(t, body, env = {}) {
  const script = `
    process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
    const lib = require(${JSON.stringify(ROOT)});
    const pc = require(${JSON.stringify(path.join(ROOT, 'js', 'process-context', 'process-context'))});
    const say = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
    const onLine = (fn) => require('node:readline').createInterface({ input: process.stdin }).on('line', fn);
    setInterval(() => {}, 1000);
    ${body}
  `;
  const child = spawn(process.execPath, [...process.execArgv.filter((a) => a.includes('async-context-frame')), '-e', script], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, OTEL_SERVICE_NAME: '', OTEL_RESOURCE_ATTRIBUTES: '', ...env },
    cwd: ROOT,
  });
  t.after(() => child.kill('SIGKILL'));
  const lines = [];
  const waiters = [];
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    for (let nl; (nl = buf.indexOf('\n')) >= 0; buf = buf.slice(nl + 1)) {
      const msg = JSON.parse(buf.slice(0, nl));
      if (waiters.length > 0) waiters.shift().resolve(msg);
      else lines.push(msg);
    }
  });
  child.once('exit', (code, signal) => {
    child.exited = { code, signal };
    for (const w of waiters.splice(0)) w.reject(new Error(`child exited with ${code ?? signal}`));
  });
  child.next = () => (lines.length > 0 ? Promise.resolve(lines.shift())
    : child.exited ? Promise.reject(new Error(`child exited with ${child.exited.code ?? child.exited.signal}`))
      : new Promise((resolve, reject) => waiters.push({ resolve, reject })));
  child.send = (line) => child.stdin.write(`${line}\n`);
  return child;
}

module.exports = { startChild };
