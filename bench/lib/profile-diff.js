'use strict';
// Where does mode (b)'s extra CPU go? Compares two V8 CPU profiles (server.js run with
// --node-arg=--cpu-prof) by function: self and inclusive share of the busy samples, converted to
// ns per request with each mode's measured CPU µs/request.
//   node bench/lib/profile-diff.js A.cpuprofile A_US_PER_REQ B.cpuprofile B_US_PER_REQ [TOP]

const fs = require('node:fs');
const path = require('node:path');

// Not CPU work of JS code; the garbage collector is, and is kept.
const IDLE = new Set(['(idle)', '(program)']);
// The package's own JS layer (js/ and its folders): listed separately, as ns per request in B.
const STARTUP = /run_main_module|run_main$/;
const OWN_CODE = /\/js\/([^/]+\/)?[^/]+\.js$/;
// Node's own hook dispatch (async_hooks emit functions, its promise hooks, AsyncLocalStorage).
const HOOK_MACHINERY = /^node:(internal\/)?async_hooks$/;

function key(frame) {
  const file = frame.url ? path.basename(frame.url.replace(/^file:\/\//, '')) : '';
  return `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`;
}

// Self and inclusive time per function key, in µs, and the busy total (idle excluded).
function load(file) {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i];
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const self = new Map();
  const inclusive = new Map();
  const own = new Set();
  const groups = { own: 0, hooks: 0, gc: 0 };
  let busy = 0;
  const root = byId.get(profile.nodes[0].id);
  // Depth-first with the keys on the path, so recursion counts once in the inclusive time.
  const walk = (node, onPath) => {
    // Module loading at startup is not per-request work.
    if (STARTUP.test(node.callFrame.url)) return 0;
    const k = key(node.callFrame);
    if (OWN_CODE.test(node.callFrame.url)) own.add(k);
    let total = selfUs.get(node.id) ?? 0;
    if (!IDLE.has(node.callFrame.functionName)) {
      busy += total;
      self.set(k, (self.get(k) ?? 0) + total);
      if (OWN_CODE.test(node.callFrame.url)) groups.own += total;
      else if (HOOK_MACHINERY.test(node.callFrame.url)) groups.hooks += total;
      else if (node.callFrame.functionName === '(garbage collector)') groups.gc += total;
    } else total = 0;
    const path2 = onPath.has(k) ? onPath : new Set(onPath).add(k);
    for (const child of node.children ?? []) total += walk(byId.get(child), path2);
    if (!onPath.has(k)) inclusive.set(k, (inclusive.get(k) ?? 0) + total);
    return total;
  };
  walk(root, new Set());
  return { self, inclusive, busy, own, groups };
}

function main() {
  const [fileA, usA, fileB, usB, topText] = process.argv.slice(2);
  if (fileB === undefined || !(Number(usA) > 0) || !(Number(usB) > 0)) {
    throw new TypeError('usage: profile-diff.js A.cpuprofile A_US_PER_REQ B.cpuprofile B_US_PER_REQ [TOP]');
  }
  const top = Number(topText ?? 25);
  const a = load(fileA);
  const b = load(fileB);
  // ns per request of a function = its share of the busy time × the mode's CPU per request.
  const perRequest = (p, us, map, k) => ((map.get(k) ?? 0) / p.busy) * us * 1000;
  // Shares of the busy time hold up on a noisy machine better than CPU totals: steal and cache
  // pollution slow everything in a profile alike.
  const pct = (p, g) => (100 * p.groups[g]) / p.busy;
  process.stdout.write('\nshare of the busy CPU time (self), and as ns per request\n' +
    '| where | A % | B % | B − A % | B − A ns/req |\n|---|---:|---:|---:|---:|\n');
  for (const [g, label] of [['own', "the package's JS (js/)"], ['hooks', "Node's async_hooks / promise hook dispatch and AsyncLocalStorage"], ['gc', 'garbage collector']]) {
    const d = pct(b, g) - pct(a, g);
    const ns = (b.groups[g] / b.busy) * Number(usB) * 1000 - (a.groups[g] / a.busy) * Number(usA) * 1000;
    process.stdout.write(`| ${label} | ${pct(a, g).toFixed(2)} | ${pct(b, g).toFixed(2)} | ${d.toFixed(2)} | ${ns.toFixed(0)} |\n`);
  }
  for (const kind of ['self', 'inclusive']) {
    const keys = new Set([...a[kind].keys(), ...b[kind].keys()]);
    const rows = [...keys].map((k) => {
      const na = perRequest(a, Number(usA), a[kind], k);
      const nb = perRequest(b, Number(usB), b[kind], k);
      return { k, na, nb, diff: nb - na };
    }).sort((x, y) => y.diff - x.diff);
    // The largest increases, then the largest decreases (functions only A runs).
    const shown = [...rows.slice(0, top), ...rows.slice(-Math.ceil(top / 3)).filter((r) => r.diff < 0)];
    process.stdout.write(`\n${kind} time, ns per request (B − A, largest first, then the largest decreases)\n`);
    process.stdout.write('| function | A | B | B − A |\n|---|---:|---:|---:|\n');
    for (const r of shown) {
      process.stdout.write(`| ${r.k} | ${r.na.toFixed(0)} | ${r.nb.toFixed(0)} | ${r.diff.toFixed(0)} |\n`);
    }
  }
  process.stdout.write('\nB: the package\'s own functions (js/), ns per request\n| function | self | inclusive |\n|---|---:|---:|\n');
  const own = [...b.own].map((k) => ({ k, self: perRequest(b, Number(usB), b.self, k), incl: perRequest(b, Number(usB), b.inclusive, k) }))
    .sort((x, y) => y.incl - x.incl);
  for (const r of own) process.stdout.write(`| ${r.k} | ${r.self.toFixed(0)} | ${r.incl.toFixed(0)} |\n`);
}

main();
