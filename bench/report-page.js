'use strict';
// `thread-ctx report --serve`'s first paint and memory on a large traces file: the time from
// starting the server to the page showing its tables in headless chromium (playwright-core),
// and the server's peak RSS (VmHWM) once the page and the slowest request's spans are shown;
// then `--html`'s time and file size. Each run 3 times; medians printed.
//   node bench/report-page.js [TRACES_FILE]
// Without a file, it keeps the ~160 MiB file thread-ctx/cli/tests/report_cli.rs's memory test
// writes (1,000 enriched spans per message, 20 routes), as bench/report-memory.sh does.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { chromium } = require('playwright-core');

const ROOT = path.join(__dirname, '..');
const BIN = process.env.THREAD_CTX_BIN || path.join(ROOT, 'target', 'release', 'thread-ctx');
const ROUNDS = 3;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function traces() {
  if (process.argv[2]) return process.argv[2];
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'report-page-bench-')), 'traces.pb');
  spawnSync('cargo', ['test', '--release', '-q', '-p', 'thread-ctx', '--test', 'report_cli', 'traces_report_memory_stays_bounded_on_a_large_file'],
    { cwd: ROOT, stdio: 'ignore', env: { ...process.env, REPORT_TRACES_KEEP_FILE: file } });
  if (!fs.existsSync(file)) throw new Error(`the memory test kept no file at ${file}`);
  return file;
}

const peakKib = (pid) => Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

async function round(browser, file) {
  const started = process.hrtime.bigint();
  const child = spawn(BIN, ['report', '--traces', file, '--serve', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => { out += d; const m = /the page is on (http:\/\/\S+\/)/.exec(out); if (m) resolve(m[1]); });
    child.once('exit', (code) => reject(new Error(`report --serve exited (${code})`)));
  });
  const listening = Number(process.hrtime.bigint() - started) / 1e9;
  const page = await browser.newPage();
  await page.goto(url);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 120_000 });
  const firstPaint = Number(process.hrtime.bigint() - started) / 1e9;
  await page.click('#slowest tbody tr');
  await page.waitForSelector('#trace');
  const rss = peakKib(child.pid) / 1024;
  await page.close();
  child.kill('SIGTERM');
  return { firstPaint, listening, rss };
}

async function main() {
  const file = traces();
  console.log(`file: ${file}, ${(fs.statSync(file).size / 2 ** 20).toFixed(0)} MiB; ${BIN}`);
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
  const runs = [];
  try {
    for (let i = 1; i <= ROUNDS; i++) {
      const r = await round(browser, file);
      runs.push(r);
      console.log(`round ${i}: first paint ${r.firstPaint.toFixed(2)} s (listening after ${r.listening.toFixed(2)} s), server peak RSS ${r.rss.toFixed(0)} MiB`);
    }
  } finally {
    await browser.close();
  }
  const html = path.join(os.tmpdir(), `report-page-bench-${process.pid}.html`);
  const exports = [];
  for (let i = 1; i <= ROUNDS; i++) {
    const r = spawnSync('/usr/bin/time', ['-f', '%e %M', BIN, 'report', '--traces', file, '--html', html], { encoding: 'utf8' });
    const [wall, kib] = r.stderr.trim().split('\n').pop().split(' ').map(Number);
    exports.push({ wall, rss: kib / 1024 });
  }
  console.log(`median of ${ROUNDS}: first paint ${median(runs.map((r) => r.firstPaint)).toFixed(2)} s, server peak RSS ${median(runs.map((r) => r.rss)).toFixed(0)} MiB; ` +
    `--html ${median(exports.map((r) => r.wall)).toFixed(2)} s, peak RSS ${median(exports.map((r) => r.rss)).toFixed(0)} MiB, ${(fs.statSync(html).size / 2 ** 20).toFixed(1)} MiB file`);
  fs.rmSync(html, { force: true });
}

main().catch((e) => { console.error(e); process.exit(1); });
