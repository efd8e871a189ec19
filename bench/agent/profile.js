'use strict';
// Where `thread-ctx agent`'s own CPU goes (as root): runs bench/agent/run.js (one configuration,
// one round), and while its agent profiles the services, `perf record -e cpu-clock -F 999 -g` of
// the agent process for --seconds; then prints perf's report of it: the share of the agent's
// samples per shared object and per symbol (self time), with the sample count they are shares of.
// The percentages docs/benchmarks.md gives of the agent's profile come from this script.
//   sudo node bench/agent/profile.js [--seconds 40] [--services 20] [--hz 99] [--naming heap]
//                                    [--bin target/release/thread-ctx] [--alloc] [--limit 1]
// --limit: the smallest share (%) a symbol is listed with.
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '../..');

const { option } = require('../lib/args');
const SECONDS = Number(option('seconds', '40'));
const SERVICES = Number(option('services', '20'));
const HZ = Number(option('hz', '99'));
const NAMING = option('naming', 'heap');
const BIN = path.resolve(option('bin', path.join(root, 'target/release/thread-ctx')));
const LIMIT = Number(option('limit', '1'));
if (!(SECONDS >= 5)) throw new RangeError(`--seconds: expected at least 5, got ${option('seconds')}`);
if (!(SERVICES >= 1)) throw new RangeError(`--services: expected at least 1, got ${option('services')}`);
if (!(LIMIT >= 0)) throw new RangeError(`--limit: expected a share in %, got ${option('limit')}`);
if (process.getuid() !== 0) throw new Error('the agent needs root (eBPF), and perf needs it to follow another user\'s process: run with sudo');
if (spawnSync('perf', ['--version']).status !== 0) throw new Error('perf is not installed (apt-get install linux-perf)');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The pid of a `thread-ctx` process whose parent is `parent`, once there is one. */
async function agentOf(parent, timeoutMs) {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await sleep(200)) {
    for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
      try {
        const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
        const [comm, rest] = [stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), stat.slice(stat.lastIndexOf(')') + 2).split(' ')];
        if (comm === 'thread-ctx' && Number(rest[1]) === parent) return Number(pid);
      } catch {
        // gone meanwhile
      }
    }
  }
  throw new Error(`no thread-ctx agent under bench/agent/run.js (pid ${parent}) within ${timeoutMs / 1000} s`);
}

/** perf's report lines of `data` sorted by `key`, as [share %, name], down to LIMIT %. */
function report(data, key) {
  const out = execFileSync('perf', ['report', '-i', data, '--stdio', '--no-children', '-g', 'none', '--sort', key, '--percent-limit', String(LIMIT)],
    { encoding: 'utf8', maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'ignore'] });
  const samples = (out.match(/^# Samples: (\S+)/m) || [])[1];
  const rows = out.split('\n').filter((l) => /^\s+[\d.]+%/.test(l)).map((l) => {
    const m = l.match(/^\s+([\d.]+)%\s+(.*)$/);
    // `[k] name` (kernel) or `[.] name` (user), and perf's empty columns after it.
    return [Number(m[1]), m[2].replace(/^\[[.k]\]\s+/, '').replace(/(\s+-)+\s*$/, '').trim()];
  });
  return { samples, rows };
}

async function main() {
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  const warmup = 20; // the agent's first window (10 s) and the services' JIT warm-up
  const runArgs = [path.join(__dirname, 'run.js'), '--services', String(SERVICES), '--hz', String(HZ), '--seconds', String(SECONDS + warmup + 15),
    '--rounds', '1', '--naming', NAMING, '--bins', BIN, ...(process.argv.includes('--alloc') ? ['--alloc'] : [])];
  const run = spawn(process.execPath, runArgs, { stdio: ['ignore', 'pipe', 'inherit'] });
  // run.js kills what it started when it ends; it is ended with this script, however that ends.
  process.once('exit', () => run.kill('SIGINT'));
  let table = '';
  run.stdout.on('data', (d) => (table += d));
  const ended = new Promise((r) => run.once('exit', r));
  const agent = await agentOf(run.pid, 180_000);
  await sleep(warmup * 1000);
  const data = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-profile-')), 'perf.data');
  const load = os.loadavg()[0];
  const started = new Date().toISOString().slice(0, 16).replace('T', ' ');
  const rec = spawnSync('perf', ['record', '-e', 'cpu-clock', '-F', '999', '-g', '-p', String(agent), '-o', data, '--', 'sleep', String(SECONDS)],
    { encoding: 'utf8' });
  if (rec.status !== 0) throw new Error(`perf record failed (${rec.status}): ${rec.stderr}`);
  await ended;
  const bySymbol = report(data, 'symbol');
  const byObject = report(data, 'dso');
  fs.rmSync(path.dirname(data), { recursive: true, force: true });
  console.log(`# the agent's own CPU by perf, ${started} UTC, load ${load.toFixed(1)}, at ${commit}`);
  console.log(`# sudo node bench/agent/profile.js --seconds ${SECONDS} --services ${SERVICES} --hz ${HZ} --naming ${NAMING}`);
  console.log(`# perf record -e cpu-clock -F 999 -g -p AGENT for ${SECONDS} s: ${bySymbol.samples} samples; shares of self time >= ${LIMIT} %`);
  console.log('\n| shared object | share |\n|---|---|');
  for (const [pct, name] of byObject.rows) console.log(`| ${name} | ${pct.toFixed(1)} % |`);
  console.log('\n| symbol | share |\n|---|---|');
  for (const [pct, name] of bySymbol.rows) console.log(`| \`${name}\` | ${pct.toFixed(1)} % |`);
  console.log(`\nThe run it profiled (bench/agent/run.js):\n${table.trim()}`);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
