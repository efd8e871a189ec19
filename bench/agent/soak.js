'use strict';
// Soak of `thread-ctx agent` (as root): does its memory stay flat for weeks? For `--minutes` (20
// or more for a real run) it profiles, host-wide, two services that keep compiling new code
// (bench/agent/jit-service.js: a new JS function compiled every few ms; plain node, their frames
// named from their V8 heaps, or with --perf-map under --perf-basic-prof
// --interpreted-frames-native-stack, named from their growing perf maps) plus a short-lived one
// (20 s) started every 20 s, with
// `agent --interval 10s --hz 99 --pprof-dir`. Every minute it prints the agent's RSS (anonymous
// and file apart), its open file descriptors, the entries of its BPF `targets` map, its status
// line's evictions, cache sizes and heap, and the share of the JIT services' samples with an
// unnamed JS frame; at the end, whether RSS stayed flat after warm-up (the last 3 minutes within
// 10 % of minutes 4-6) and whether any exited service left a BPF map entry or a descriptor behind.
//   node bench/agent/soak.js [--minutes 22] [--bin target/release/thread-ctx] [--agent-log FILE] [--perf-map]
// Host-wide discovery also tracks other publishing processes on the machine: the per-minute
// line says how many were tracked.
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '../..');
const { option } = require('../lib/args');
const MINUTES = Number(option('minutes', '22'));
const bin = path.resolve(option('bin', path.join(root, 'target/release/thread-ctx')));
// Every line the agent writes on stderr (status lines included) also goes to this file.
const agentLog = option('agent-log', null);
if (!(MINUTES >= 7)) throw new RangeError(`--minutes: expected at least 7 (warm-up is minutes 4-6), got ${MINUTES}`);
if (process.getuid() !== 0) throw new Error('the agent needs root (eBPF): run with sudo');
if (!fs.existsSync(bin)) throw new Error(`no ${bin}: run cargo build --release first`);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const perfMapFlags = ['--perf-basic-prof', '--interpreted-frames-native-stack', '--logfile=/dev/null'];
const jitArgs = [...(process.argv.includes('--perf-map') ? perfMapFlags : []), path.join(__dirname, 'jit-service.js')];
const children = new Set();
const started = [];
// V8 never deletes its perf map; these services write ~1 MB of it a minute.
const removePerfMaps = () => started.forEach((pid) => fs.rmSync(`/tmp/perf-${pid}.map`, { force: true }));

function startService(name, lifetimeMs = 0) {
  const c = spawn(process.execPath, jitArgs, {
    env: { ...process.env, OTEL_SERVICE_NAME: name, SERVICE_LIFETIME_MS: String(lifetimeMs) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.add(c);
  started.push(c.pid);
  c.on('exit', () => children.delete(c));
  return c;
}

function rssMiB(pid, field = 'VmRSS') {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`${field}:\\s+(\\d+) kB`));
  return m ? Number(m[1]) / 1024 : NaN;
}
const fds = (pid) => fs.readdirSync(`/proc/${pid}/fd`).length;

// The agent's `targets` map, found through its own descriptors (fdinfo names each map's id):
// other samplers load and unload programs of the same name meanwhile.
function targetsMapOf(pid) {
  for (const fd of fs.readdirSync(`/proc/${pid}/fdinfo`)) {
    let info = '';
    try {
      info = fs.readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8');
    } catch {
      continue;
    }
    const id = (info.match(/^map_id:\s+(\d+)/m) || [])[1];
    if (!id) continue;
    try {
      if (JSON.parse(execFileSync('bpftool', ['map', 'show', 'id', id, '-j']).toString()).name === 'targets') return Number(id);
    } catch {}
  }
  return null;
}
function mapPids(mapId) {
  if (mapId === null) return [];
  const entries = JSON.parse(execFileSync('bpftool', ['map', 'dump', 'id', String(mapId), '-j']).toString());
  return entries.map((e) => {
    const key = e.key ?? e.formatted?.key;
    return Array.isArray(key) ? key.reduce((n, b, i) => n + Number(b) * 256 ** i, 0) : Number(key);
  });
}

// Of the CPU samples in the two JIT services' profiles written since the last call, how many
// have a JS frame left unnamed ([anon:jit]): what the bound on each perf map costs in names.
// The agent's own `flamegraph --folded` reads each pprof file back.
const seenProfiles = new Set();
function unnamedJsShare(dir) {
  let samples = 0;
  let unnamed = 0;
  for (const f of fs.readdirSync(dir).filter((f) => /^soak-jit-[ab]-/.test(f) && !seenProfiles.has(f))) {
    seenProfiles.add(f);
    const folded = path.join(dir, `${f}.folded`);
    try {
      execFileSync(bin, ['flamegraph', '--folded', folded, path.join(dir, f)], { stdio: 'ignore' });
    } catch {
      continue; // a file being written: counted with the next minute's
    }
    for (const line of fs.readFileSync(folded, 'utf8').split('\n').filter(Boolean)) {
      const count = Number(line.slice(line.lastIndexOf(' ') + 1));
      samples += count;
      if (line.includes('[anon:jit]')) unnamed += count;
    }
    fs.rmSync(folded);
  }
  return samples ? `${((100 * unnamed) / samples).toFixed(1)} % of ${samples}` : '-';
}

(async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'soak-agent-'));
  startService('soak-jit-a');
  startService('soak-jit-b');
  await sleep(3000);
  const agent = spawn(bin, ['agent', '--interval', '10s', '--hz', '99', '--pprof-dir', tmp], { stdio: ['ignore', 'ignore', 'pipe'] });
  let lastStatus = '';
  const notes = [];
  let rest = '';
  const logFd = agentLog ? fs.openSync(agentLog, 'w') : null;
  agent.stderr.on('data', (d) => {
    if (logFd !== null) fs.writeSync(logFd, d);
    const lines = (rest + d).split('\n');
    rest = lines.pop();
    for (const l of lines) if (l.includes(': window ')) lastStatus = l; else notes.push(l);
  });
  while (!lastStatus) await sleep(200);
  const mapId = targetsMapOf(agent.pid);
  const shortLived = [];
  const spawner = setInterval(() => shortLived.push(startService(`soak-short-${shortLived.length}`, 20_000).pid), 20_000);
  const minutes = [];
  console.log(`thread-ctx agent soak: ${MINUTES} min, ${os.cpus().length} CPUs, load ${os.loadavg()[0].toFixed(1)}; agent pid ${agent.pid}`);
  console.log('| minute | RSS mean (MiB) | RSS max (MiB) | of which anonymous / file (MiB) | fds | BPF targets entries | processes tracked | evicted (status line) | cached now | heap | JIT services\' samples with an unnamed JS frame |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (let minute = 1; minute <= MINUTES; minute++) {
    const rss = [];
    for (let i = 0; i < 6; i++) {
      await sleep(10_000);
      rss.push(rssMiB(agent.pid));
    }
    const tracked = Number((lastStatus.match(/: (\d+) processes/) || [])[1] || 0);
    const evicted = (lastStatus.match(/evicted: ([^;]*)/) || [])[1] || '';
    // Builds whose status line says what the caches hold and what the allocator keeps.
    const cached = (lastStatus.match(/cached now: ([^;]*)/) || [])[1] || '';
    const heap = (lastStatus.match(/heap: ([^;]*)/) || [])[1] || '';
    const row = { minute, mean: rss.reduce((a, b) => a + b) / rss.length, max: Math.max(...rss), fds: fds(agent.pid), entries: mapPids(mapId).length, tracked };
    minutes.push(row);
    const split = `${rssMiB(agent.pid, 'RssAnon').toFixed(1)} / ${rssMiB(agent.pid, 'RssFile').toFixed(1)}`;
    console.log(`| ${minute} | ${row.mean.toFixed(1)} | ${row.max.toFixed(1)} | ${split} | ${row.fds} | ${row.entries} | ${row.tracked} | ${evicted} | ${cached} | ${heap} | ${unnamedJsShare(tmp)} |`);
  }
  clearInterval(spawner);
  // Every short-lived service has exited (20 s) and been seen gone (a scan, at most 5 s) by now.
  await sleep(35_000);
  const left = mapPids(mapId).filter((pid) => shortLived.includes(pid));
  const openFds = fds(agent.pid);
  const fdTargets = fs.readdirSync(`/proc/${agent.pid}/fd`).map((fd) => { try { return fs.readlinkSync(`/proc/${agent.pid}/fd/${fd}`); } catch { return ''; } });
  const deadRefs = fdTargets.filter((t) => shortLived.some((pid) => t.includes(`/proc/${pid}/`)));
  agent.kill('SIGTERM');
  await new Promise((r) => agent.on('exit', r));
  for (const c of children) c.kill('SIGKILL');
  removePerfMaps();
  fs.rmSync(tmp, { recursive: true, force: true });

  const mean = (rows) => rows.reduce((a, r) => a + r.mean, 0) / rows.length;
  const warm = mean(minutes.slice(3, 6));
  const last = mean(minutes.slice(-3));
  const ratio = last / warm;
  console.log(`\nRSS minutes 4-6: ${warm.toFixed(1)} MiB; last 3 minutes: ${last.toFixed(1)} MiB (${ratio.toFixed(3)}x): ${Math.abs(ratio - 1) <= 0.1 ? 'flat (within 10 %)' : 'NOT flat'}`);
  console.log(`peak RSS over the run: ${Math.max(...minutes.map((r) => r.max)).toFixed(1)} MiB`);
  console.log(`short-lived services started: ${shortLived.length}; BPF targets entries of exited ones left: ${left.length}; descriptors into exited ones: ${deadRefs.length}`);
  console.log(`fds: minute 4 ${minutes[3].fds}, after the last exit ${openFds}`);
  const lastNotes = notes.filter((l) => /exited|skipped|error/.test(l)).slice(-3);
  if (lastNotes.length) console.log(`last notes: ${lastNotes.join(' | ')}`);
})().catch((e) => {
  for (const c of children) c.kill('SIGKILL');
  removePerfMaps();
  console.error(e);
  process.exit(1);
});
