'use strict';
// Command-line options the benchmark runners share: validation of numbers and the option set of
// the two service benchmarks (bench:http, bench:service), which differ only in their modes.

const os = require('node:os');
const { parseArgs } = require('node:util');
const { resolveNode } = require('./node-binary');

/** The word after `--name` on the command line, or `fallback` (the agent benchmarks' options). */
function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1];
}

function positiveInteger(name, text) {
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) throw new TypeError(`--${name}: expected a positive integer, got ${JSON.stringify(text)}`);
  return value;
}

function cpuNumber(name, text) {
  const cpus = os.cpus().length;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0 || value >= cpus) {
    throw new TypeError(`--${name}: expected a CPU number 0-${cpus - 1}, got ${JSON.stringify(text)}`);
  }
  return value;
}

/** --cpu of the single-process benchmarks: a CPU number to pin to, or 'none' (null). */
function cpuOrNone(name, text) {
  return text === 'none' ? null : cpuNumber(name, text);
}

/**
 * Parses a service benchmark's command line: --node, --node-arg, --rounds (15), --duration and
 * --warmup (5 and 2 s; --fast: 2 and 1), --connections, --modes, --server-cpu, --client-cpu,
 * --json, --rounds-table, --report. Returns { report, roundsTable } for --report, else the
 * config with `modes` as given (the caller validates them).
 */
function parseServiceArgs(argv, { connections, modes }) {
  const { values } = parseArgs({
    args: argv,
    options: {
      node: { type: 'string' },
      'node-arg': { type: 'string', multiple: true, default: [] },
      rounds: { type: 'string', default: '15' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      fast: { type: 'boolean', default: false },
      connections: { type: 'string', default: String(connections) },
      modes: { type: 'string', default: modes },
      'server-cpu': { type: 'string', default: '0' },
      'client-cpu': { type: 'string', default: '1' },
      json: { type: 'string' },
      'rounds-table': { type: 'boolean', default: false },
      report: { type: 'string' },
    },
  });
  if (values.report !== undefined) return { report: values.report, roundsTable: values['rounds-table'] };
  const config = {
    nodeBin: resolveNode(values.node),
    nodeArgs: values['node-arg'],
    rounds: positiveInteger('rounds', values.rounds),
    duration: positiveInteger('duration', values.duration ?? (values.fast ? '2' : '5')),
    warmup: positiveInteger('warmup', values.warmup ?? (values.fast ? '1' : '2')),
    connections: positiveInteger('connections', values.connections),
    modes: values.modes,
    serverCpu: cpuNumber('server-cpu', values['server-cpu']),
    clientCpu: cpuNumber('client-cpu', values['client-cpu']),
    json: values.json,
    roundsTable: values['rounds-table'],
  };
  if (config.serverCpu === config.clientCpu) throw new TypeError('--server-cpu and --client-cpu: expected two different CPUs');
  return config;
}

module.exports = { option, positiveInteger, cpuNumber, cpuOrNone, parseServiceArgs };
