'use strict';
// A private PostgreSQL server for the service benchmark: Debian's `postgresql` package (installed
// when missing, as root), a fresh cluster in a temporary directory, listening only on a unix
// socket in that directory (no TCP port to collide with anything), seeded, stopped and removed
// afterwards. Started under taskset so it stays off the service's CPU.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const POSTGRES_LIB = '/usr/lib/postgresql';

function binDir() {
  if (!fs.existsSync(POSTGRES_LIB)) return null;
  const versions = fs.readdirSync(POSTGRES_LIB).filter((v) => /^\d+$/.test(v) && fs.existsSync(path.join(POSTGRES_LIB, v, 'bin', 'pg_ctl')));
  if (versions.length === 0) return null;
  return path.join(POSTGRES_LIB, versions.sort((a, b) => Number(b) - Number(a))[0], 'bin');
}

function ensureInstalled(log) {
  let bin = binDir();
  if (bin !== null) return bin;
  if (process.getuid() !== 0) {
    throw new Error('PostgreSQL: expected Debian\'s postgresql package (apt-get install postgresql); run as root to have it installed');
  }
  log('installing Debian\'s postgresql package (apt-get)');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['-o', 'DPkg::Lock::Timeout=600', 'update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['-o', 'DPkg::Lock::Timeout=600', 'install', '-y', '-qq', 'postgresql'], { stdio: 'inherit', env });
  bin = binDir();
  if (bin === null) throw new Error(`PostgreSQL: expected pg_ctl under ${POSTGRES_LIB}/<version>/bin after installing, found none`);
  return bin;
}

// PostgreSQL refuses to run as root: as root, its commands run as the `postgres` user the
// package creates, and the directory belongs to that user.
function runner() {
  if (process.getuid() !== 0) return (file, args, options) => execFileSync(file, args, options);
  return (file, args, options) => execFileSync('runuser', ['-u', 'postgres', '--', file, ...args], options);
}

/**
 * Starts a server; returns { socketDir, port, database, user, stop() }. `cpus` is a taskset CPU
 * list for the server processes. `seed(sql)` is run with psql once it is up.
 */
function startPostgres({ cpus, seedSql, log = () => {} }) {
  const bin = ensureInstalled(log);
  const run = runner();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'otel-thread-ctx-pg-'));
  if (process.getuid() === 0) {
    const { uid, gid } = fs.statSync('/var/lib/postgresql');
    fs.chownSync(dir, uid, gid);
  }
  const data = path.join(dir, 'data');
  const port = 5432; // only names the socket file (.s.PGSQL.5432) in our own directory
  const quiet = { stdio: ['ignore', 'ignore', 'pipe'] };
  run(path.join(bin, 'initdb'), ['-D', data, '-U', 'bench', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'], quiet);
  const settings = [
    "listen_addresses=''", `unix_socket_directories='${dir}'`, `port=${port}`,
    'fsync=off', 'synchronous_commit=off', 'full_page_writes=off', 'shared_buffers=64MB', 'max_connections=40',
  ];
  fs.appendFileSync(path.join(data, 'postgresql.conf'), settings.map((s) => `${s}\n`).join(''));
  let started = false;
  const stop = () => {
    try {
      if (started) run(path.join(bin, 'pg_ctl'), ['-D', data, '-m', 'fast', '-w', 'stop'], quiet);
    } finally {
      started = false;
      fs.rmSync(dir, { recursive: true, force: true });
    }
  };
  try {
    execFileSync('taskset', ['-c', cpus, ...(process.getuid() === 0 ? ['runuser', '-u', 'postgres', '--'] : []),
      path.join(bin, 'pg_ctl'), '-D', data, '-l', path.join(dir, 'server.log'), '-w', 'start'], quiet);
    started = true;
    run(path.join(bin, 'psql'), ['-h', dir, '-p', String(port), '-U', 'bench', '-d', 'postgres', '-v', 'ON_ERROR_STOP=1', '-q', '-c', 'CREATE DATABASE shop'], quiet);
    run(path.join(bin, 'psql'), ['-h', dir, '-p', String(port), '-U', 'bench', '-d', 'shop', '-v', 'ON_ERROR_STOP=1', '-q'], { ...quiet, input: seedSql, stdio: ['pipe', 'ignore', 'pipe'] });
  } catch (err) {
    const logFile = path.join(dir, 'server.log');
    const tail = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').slice(-5).join(' | ') : '';
    stop();
    throw new Error(`PostgreSQL: could not start or seed the server: ${String(err.stderr ?? err.message).trim()} ${tail}`);
  }
  return { socketDir: dir, port, database: 'shop', user: 'bench', stop };
}

module.exports = { startPostgres };
