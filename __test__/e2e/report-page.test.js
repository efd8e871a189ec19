'use strict';
// `thread-ctx report --serve` and `--html` in a real browser: Debian's chromium, headless, driven
// by playwright-core, on the demo's own files (node demo/run.js, the whole pipeline: service,
// agent, Collector, Jaeger). Served, then as the exported file opened from file:// with every
// request but the file's refused: the page loads with no console error, the slowest request shows
// its cause bar and its holder's line (as `report --traces --json --slowest 1` names it), the flame
// graph of /api/search has rankSearchResults as its widest JS frame (summed over where it is drawn), and a
// holder row of who made whom wait leads to the requests it delayed and on to their spans.
// PAGE_SCREENSHOT=FILE.png saves the served page (docs/report-page.png).
// A second test opens a request across two services, the GraphQL gateway calling inventory, from
// real traces the pipeline wrote (__test__/fixtures/graphql-traces.pb, cut by the script beside
// it): spans of both services, inventory's server span under the gateway's client span that
// called it (by parent span id), the root's critical path shown.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const pipeline = require('../../demo/pipeline');
const { runDir } = require('./run-dir');
const { needs, canRun } = require('../helpers/needs');
const graphqlTraces = require('../fixtures/graphql-traces');

const CHROMIUM = '/usr/bin/chromium';
const need = needs((process.getuid() !== 0 && 'the demo\'s agent needs root to load its eBPF programs')
  || (!fs.existsSync(CHROMIUM) && `${CHROMIUM} is not installed (scripts/setup.sh installs Debian's chromium)`));

// Starts `report --serve` on a free loopback port; resolves with its process and URL.
function serve(args, procs) {
  const child = spawn(pipeline.BIN.threadCtx, ['report', ...args, '--serve', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const p = { name: 'report --serve', child, exited: new Promise((r) => child.once('exit', r)) };
  procs.push(p);
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /the page is on (http:\/\/\S+\/)/.exec(out);
      if (m) resolve({ ...p, url: m[1] });
    });
    child.once('exit', (code) => reject(new Error(`report --serve exited (${code}): ${err}`)));
  });
}

// The checks on one page, served or from a file.
async function checkPage(browser, url, expected, { offline, screenshot }) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const refused = [];
  if (offline) {
    await context.setOffline(true);
    await context.route('**/*', (r) => (r.request().url().startsWith('file:') ? r.continue() : (refused.push(r.request().url()), r.abort())));
  }
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.setDefaultTimeout(20_000);
  await page.goto(url);
  await page.waitForSelector('body[data-ready="1"]').catch((e) => { throw new Error(`${e.message}; console errors: ${errors.join('; ')}`); });

  // The slowest request: its spans, the entry span's cause bar and who held it.
  await page.click(`#slowest tbody tr[data-trace="${expected.trace}"]`);
  const entry = page.locator(`#trace tr[data-span="${expected.span}"]`);
  await entry.waitFor();
  const parts = await entry.locator('.cause-bar span').count();
  assert.ok(parts >= 2, `the slowest request's cause bar has ${parts} parts`);
  const holders = await entry.locator('.holder').allTextContents();
  if (expected.holderLine) assert.ok(holders.some((h) => h.includes(expected.holderLine)), `no holder line ${expected.holderLine} in ${JSON.stringify(holders)}`);
  else assert.deepEqual(holders, [], 'report --traces names no holder of the slowest request');
  if (screenshot) await page.screenshot({ path: screenshot });

  // The flame graph of /api/search: its widest JS frame.
  await page.click('#routes tr[data-route="/api/search"] .flame-button');
  await page.waitForSelector('#flame g.frame[data-js]');
  // A frame's width summed over the places it is drawn (a recursive frame once, at its outermost).
  const widest = await page.evaluate(() => {
    const width = new Map();
    d3.selectAll('#flame g.frame[data-js]').each((d) => {
      for (let a = d.parent; a; a = a.parent) if (a.data.name === d.data.name) return;
      width.set(d.data.name, (width.get(d.data.name) || 0) + d.value);
    });
    return [...width].sort((a, b) => b[1] - a[1])[0];
  });
  assert.match(widest[0], /^rankSearchResults \(service\.js:\d+\)$/, `the widest JS frame of /api/search: ${widest}`);
  const listed = await page.locator('#widest li .mono').first().textContent();
  assert.equal(listed, widest[0], 'the page lists the widest JS frame first');

  // Who made whom wait: the heaviest holder with a line, its delayed requests, one's spans.
  await page.click('#holders tbody tr:not(:has(td:first-child:text-is("(others)")))');
  const delayed = page.locator('#delayed tbody tr[data-trace]');
  await delayed.first().waitFor();
  const trace = await delayed.first().getAttribute('data-trace');
  await delayed.first().click();
  await page.waitForSelector(`#trace`);
  assert.ok((await page.locator('#detail h2').textContent()).includes(trace), 'the delayed request\'s spans open');
  // A sortable table: by delayed requests, ascending then descending.
  await page.click('#holders th[data-sort="delayed"]');
  const counts = (await page.locator('#holders tbody tr td:nth-child(4)').allTextContents()).map(Number);
  assert.deepEqual(counts, [...counts].sort((a, b) => b - a), 'sorted by delayed, descending');

  assert.deepEqual(errors, [], 'console errors');
  assert.deepEqual(refused, [], 'requests the file made');
  await context.close();
}

test('report --serve and --html: the demo\'s page in chromium', { skip: need.skip, timeout: 300_000 }, need.guard(async (t) => {
  if (!canRun(t, pipeline.missing() ?? false)) return;
  const { chromium } = require('playwright-core');
  const { dir, procs } = runDir(t, 'report-page-e2e');
  const files = { traces: path.join(dir, 'traces.pb'), profiles: path.join(dir, 'profiles.pb'), html: path.join(dir, 'page.html') };
  // REPORT_PAGE_DEMO_DIR: a directory a demo run already wrote these files to (while working on the page).
  const reuse = process.env.REPORT_PAGE_DEMO_DIR;
  if (reuse) {
    for (const k of ['traces', 'profiles']) files[k] = path.join(reuse, path.basename(files[k]));
    const html = spawnSync(pipeline.BIN.threadCtx, ['report', '--traces', files.traces, '--otlp', files.profiles, '--html', files.html], { encoding: 'utf8' });
    assert.equal(html.status, 0, html.stderr);
  } else {
    const demo = spawnSync(process.execPath, [path.join(pipeline.ROOT, 'demo', 'run.js'), '--seconds', '4',
      '--traces-out', files.traces, '--otlp-out', files.profiles, '--page-out', files.html, '--flamegraph-all', path.join(dir, 'all.svg')],
    { encoding: 'utf8', timeout: 240_000 });
    assert.equal(demo.status, 0, `the demo failed:\n${demo.stdout}\n${demo.stderr}`);
    assert.match(demo.stdout, /the page of it all .*: file:\/\/.*page\.html/, 'the demo prints where its page is');
  }

  const r = spawnSync(pipeline.BIN.threadCtx, ['report', '--traces', files.traces, '--json', '--slowest', '1'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const slowest = JSON.parse(r.stdout).slowest[0];
  const expected = { trace: slowest.trace_id, span: slowest.span_id, holderLine: slowest.explanation.held_by[0]?.top_frame };
  t.diagnostic(`slowest request ${slowest.route} ${slowest.duration_ms.toFixed(1)} ms, trace ${expected.trace}, held by ${expected.holderLine ?? 'none'}`);

  const served = await serve(['--traces', files.traces, '--otlp', files.profiles, '--jaeger', 'http://127.0.0.1:16686'], procs);
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  t.after(() => browser.close());
  await checkPage(browser, served.url, expected, { offline: false, screenshot: process.env.PAGE_SCREENSHOT });
  await checkPage(browser, `file://${files.html}`, expected, { offline: true });
}));

const needChromium = needs(!fs.existsSync(CHROMIUM) && `${CHROMIUM} is not installed (scripts/setup.sh installs Debian's chromium)`);

test('report --html: a request across two services nests by parent and shows its critical path', { skip: needChromium.skip, timeout: 60_000 }, needChromium.guard(async (t) => {
  if (!canRun(t, !fs.existsSync(pipeline.BIN.threadCtx) && `${pipeline.BIN.threadCtx} is not built (cargo build --release -p thread-ctx)`)) return;
  const { chromium } = require('playwright-core');
  const { dir } = runDir(t, 'report-page-services');
  // What the file holds, read apart from the Rust reader: the slowest gateway request whose root
  // carries the connector's path, a gateway client span in it and the inventory server span it called.
  const spans = graphqlTraces.readSpans(fs.readFileSync(graphqlTraces.FILE));
  const [trace] = graphqlTraces.pick(spans, 1);
  assert.ok(trace, 'the fixture holds a trace of the gateway calling inventory');
  const of = spans.filter((s) => s.traceId === trace);
  const root = of.find((s) => s.service === 'gateway' && !s.parentId);
  const server = of.find((s) => s.service === 'inventory' && s.kind === 2 && of.some((c) => c.spanId === s.parentId && c.service === 'gateway' && c.kind === 3));
  const client = of.find((c) => c.spanId === server.parentId);
  const html = path.join(dir, 'page.html');
  const r = spawnSync(pipeline.BIN.threadCtx, ['report', '--traces', graphqlTraces.FILE, '--html', html], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);

  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  t.after(() => browser.close());
  const context = await browser.newContext({ offline: true });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.setDefaultTimeout(20_000);
  await page.goto(`file://${html}`);
  await page.waitForSelector('body[data-ready="1"]');
  await page.click(`#slowest tbody tr[data-trace="${trace}"]`);
  await page.locator(`#trace tr[data-span="${root.spanId}"]`).waitFor();

  const rows = await page.locator('#trace tbody tr').evaluateAll((trs) => trs.map((tr) => ({ ...tr.dataset })));
  assert.equal(rows.length, of.length, 'every span of the trace is shown');
  assert.deepEqual([...new Set(rows.map((x) => x.service))].sort(), ['gateway', 'inventory']);
  const at = (id) => rows.findIndex((x) => x.span === id);
  assert.deepEqual(rows[0], { span: root.spanId, parent: '', service: 'gateway', depth: '0' }, 'the root first, at the top');
  assert.equal(rows[at(server.spanId)].parent, client.spanId, "inventory's server span hangs under the gateway's client span");
  assert.equal(Number(rows[at(server.spanId)].depth), Number(rows[at(client.spanId)].depth) + 1);
  assert.ok(at(server.spanId) > at(client.spanId), 'the child is drawn after its parent');
  for (const x of rows.slice(1)) assert.ok(at(x.parent) >= 0 && at(x.parent) < at(x.span), `span ${x.span} after its parent ${x.parent}`);
  const hops = await page.locator(`#trace tr[data-span="${root.spanId}"] .path .hop.critical`).allTextContents();
  assert.ok(hops.some((h) => h.includes('inventory')), `the root's critical path names inventory: ${JSON.stringify(hops)}`);
  assert.deepEqual(errors, [], 'console errors');
  await context.close();
}));
