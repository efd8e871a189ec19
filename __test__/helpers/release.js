'use strict';
// The release tarballs, built by `scripts/release.sh`, and new services that install them with
// `npm install --offline` outside the checkout (our packages come from the files, the peer
// dependencies from npm's cache). Commands in a service run with a PATH that holds node (the Node
// under test), npm, npx and sh only: no cargo, no rustc.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync, execFileSync } = require('node:child_process');
const { ROOT } = require('./addon');

const pkg = require(path.join(ROOT, 'package.json'));
const PLATFORM_PACKAGE = `${pkg.name}-linux-x64-gnu`;
const PEERS = Object.keys(pkg.peerDependencies).map((name) => `${name}@${pkg.devDependencies[name]}`);

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'otel-thread-ctx-install-'));
test.after(() => fs.rmSync(work, { recursive: true, force: true }));

// The npm and node the checkout uses (npm may need a newer Node than the one under test).
const which = (cmd) => execFileSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim();
const npmCli = fs.realpathSync(which('npm'));
const npxCli = fs.realpathSync(which('npx'));
const npmNode = fs.realpathSync(which('node'));
const npmCache = execFileSync(npmNode, [npmCli, 'config', 'get', 'cache'], { encoding: 'utf8' }).trim();

// A PATH with only node (the Node under test), npm, npx and sh, and a HOME without the user's npmrc.
const bin = path.join(work, 'bin');
fs.mkdirSync(bin);
fs.symlinkSync(process.execPath, path.join(bin, 'node'));
fs.symlinkSync(which('sh'), path.join(bin, 'sh'));
for (const [name, cli] of [['npm', npmCli], ['npx', npxCli]]) {
  fs.writeFileSync(path.join(bin, name), `#!/bin/sh\nexec ${JSON.stringify(npmNode)} ${JSON.stringify(cli)} "$@"\n`, { mode: 0o755 });
}
const home = path.join(work, 'home');
fs.mkdirSync(home);
const ENV = {
  PATH: bin, HOME: home, npm_config_cache: npmCache, npm_config_update_notifier: 'false',
  npm_config_audit: 'false', npm_config_fund: 'false', OTEL_THREAD_CTX_REQUIRE_NATIVE: '1',
};

function run(cmd, args, cwd, options = {}) {
  const r = spawnSync(cmd, args, { cwd, env: ENV, encoding: 'utf8', timeout: 180_000, ...options });
  const shown = `${cmd} ${args.join(' ')} (in ${cwd}) exited ${r.status}${r.error ? ` (${r.error.message})` : ''}\n` +
    `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
  return { ...r, shown };
}

function ok(cmd, args, cwd) {
  const r = run(cmd, args, cwd);
  assert.equal(r.status, 0, r.shown);
  return r;
}

let dist;
/**
 * The release tarballs: { main, platform, registry, agent, log }. scripts/test.sh packs them once
 * for every file and Node version (OTEL_THREAD_CTX_TEST_DIST names the directory); else built once
 * per test file, from the checkout's `release` build (`--profile release`: the shipped `dist`
 * profile differs only by whole-program LTO, a second build of every dependency).
 */
function release() {
  if (dist) return dist;
  const prebuilt = process.env.OTEL_THREAD_CTX_TEST_DIST;
  const out = prebuilt || path.join(work, 'dist');
  let log = '';
  if (!prebuilt) {
    // The checkout's own environment: building needs cargo.
    const r = spawnSync('bash', [path.join(ROOT, 'scripts/release.sh'), '--profile', 'release', '--out', out], { encoding: 'utf8', timeout: 900_000 });
    assert.equal(r.status, 0, `scripts/release.sh failed:\n${r.stdout}\n${r.stderr}`);
    log = r.stdout;
  } else {
    const logFile = path.join(out, 'release.log');
    assert.ok(fs.existsSync(logFile), `OTEL_THREAD_CTX_TEST_DIST=${out}: no release.log there (scripts/test.sh writes the release and its log)`);
    log = fs.readFileSync(logFile, 'utf8');
  }
  const tgz = (dir, name) => path.join(dir, `${name}-${pkg.version}.tgz`);
  dist = {
    main: tgz(out, pkg.name), platform: tgz(out, PLATFORM_PACKAGE), registry: tgz(path.join(out, 'registry'), pkg.name),
    agent: path.join(out, `thread-ctx-agent-${pkg.version}-linux-x64.tar.gz`), log,
  };
  for (const f of Object.values(dist).slice(0, 4)) assert.ok(fs.existsSync(f), `release.sh did not write ${f}:\n${log}`);
  return dist;
}

/**
 * A new project `name` with `tarballs` installed, and the peer dependencies unless `peers` is
 * false; `type: 'module'` makes it an ES-module project.
 */
function newService(name, tarballs, { peers = true, type } = {}) {
  const dir = path.join(work, name);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true, type }));
  // --offline: nothing may come from a registry; our packages are in the files, peers in the cache.
  ok('npm', ['install', '--offline', '--no-package-lock', ...tarballs, ...(peers ? PEERS : [])], dir);
  return dir;
}

module.exports = { pkg, PLATFORM_PACKAGE, ENV, work, run, ok, release, newService };
