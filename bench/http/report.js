'use strict';
// Turns the per-round samples into the markdown docs/benchmarks.md takes as is: per mode the median
// req/s, server CPU µs per request and p99 latency, and each mode's CPU per request relative to
// (a) and to the floor (e) as the median of the per-round ratios with a bootstrap 95 % interval,
// plus the added ns per request.

const { MODES } = require('./modes');
const { median, spread, pairedRatio, pairedDifference } = require('../lib/stats');
const { fixed, interval, utcMinute } = require('../lib/format');

const BASE = 'a';
const FLOOR = 'e';
const cpu = (s) => s.cpuUsPerRequest;

// Samples saved before the rounds were alternated by bench/lib/rounds.js carry only modeKey.
function withMode(samples) {
  return samples.map((s) => (s.mode === undefined ? { ...s, mode: s.modeKey } : s));
}

function summarise(samples, modeKeys) {
  samples = withMode(samples);
  return modeKeys.map((key) => {
    const own = samples.filter((s) => s.modeKey === key);
    return {
      key,
      label: MODES[key].label,
      mechanism: own[0].mechanism,
      rounds: own.length,
      requestsPerSecond: median(own.map((s) => s.requestsPerSecond)),
      cpuUsPerRequest: median(own.map((s) => s.cpuUsPerRequest)),
      latencyP99Ms: median(own.map((s) => s.latencyP99Ms)),
      versusBase: key === BASE || !modeKeys.includes(BASE) ? null : pairedRatio(samples, key, BASE, cpu),
      addedNs: key === BASE || !modeKeys.includes(BASE) ? null : pairedDifference(samples, key, BASE, (s) => cpu(s) * 1000),
      versusFloor: key === BASE || key === FLOOR || !modeKeys.includes(FLOOR) ? null : pairedRatio(samples, key, FLOOR, cpu),
    };
  });
}

function markdown({ summary, samples, config, machine, node, revision, startedAt, finishedAt, loadBefore, loadAfter, command }) {
  startedAt = new Date(startedAt);
  finishedAt = new Date(finishedAt);
  const withFloor = summary.some((m) => m.key === FLOOR);
  const foreign = spread(samples.map((s) => s.foreignPercent));
  const steal = spread(samples.map((s) => s.stealPercent));
  const lines = [];
  lines.push(`### HTTP overhead — Node ${node}, ${utcMinute(startedAt)}`);
  lines.push('');
  lines.push(`Machine: ${machine.nproc} × ${machine.cpuModel} (nproc ${machine.nproc}), ${machine.kernel}. ` +
    `Server pinned to CPU ${config.serverCpu}, autocannon to CPU ${config.clientCpu}, 127.0.0.1, ` +
    `${config.connections} connections, ${config.rounds} rounds × ${config.duration} s measured ` +
    `(after ${config.warmup} s warm-up), modes alternated ${config.modes.join(' ')} (order rotating) in fresh processes ` +
    `(${((finishedAt - startedAt) / 60000).toFixed(1)} min).`);
  lines.push(`Load average (1/5/15 min): ${loadBefore.join(' / ')} before, ${loadAfter.join(' / ')} after. ` +
    `CPU ${config.serverCpu} busy time not charged to the server (other processes, interrupts) during the measured windows: median ` +
    `${fixed(foreign.median, 1)} % (max ${fixed(foreign.max, 1)} %), steal ${fixed(steal.median, 1)} % ` +
    `(max ${fixed(steal.max, 1)} %).`);
  lines.push('');
  lines.push(`| mode | hook mechanism | req/s | server CPU µs/req | p99 latency ms | CPU/req ÷ (a), median [95 % CI] |${withFloor ? ' ÷ (e) the floor [95 % CI] |' : ''} added ns/req vs (a) [95 % CI] |`);
  lines.push(`|---|---|---:|---:|---:|---|${withFloor ? '---|' : ''}---|`);
  for (const m of summary) {
    const vs = m.key === BASE ? '1 (base)' : interval(m.versusBase);
    const floor = m.key === FLOOR ? '1 (base)' : interval(m.versusFloor);
    lines.push(`| ${m.label} | ${m.mechanism ?? '–'} | ${fixed(m.requestsPerSecond, 0)} | ` +
      `${fixed(m.cpuUsPerRequest, 1)} | ${fixed(m.latencyP99Ms, 0)} | ${vs} |${withFloor ? ` ${floor} |` : ''} ${interval(m.addedNs, 0, { sign: true })} |`);
  }
  lines.push('');
  lines.push(`Command: \`${command}\` at ${revision}. Medians over rounds; CPU = the server's event-loop thread ` +
    '(scheduler run time, /proc/thread-self/schedstat) over the measured window / requests served in it; ratios per round, median over rounds, ' +
    '95 % percentile-bootstrap interval; "(noise)": the interval contains 1 (or 0).');
  return lines.join('\n');
}

function roundsTable(samples) {
  const lines = ['| round | mode | req/s | CPU µs/req | p99 ms | requests | foreign CPU % | steal % | spans/req |', '|---:|---|---:|---:|---:|---:|---:|---:|---:|'];
  for (const s of samples) {
    lines.push(`| ${s.round} | ${s.modeKey} | ${fixed(s.requestsPerSecond, 0)} | ${fixed(s.cpuUsPerRequest, 1)} | ` +
      `${fixed(s.latencyP99Ms, 0)} | ${s.requests} | ${fixed(s.foreignPercent, 1)} | ${fixed(s.stealPercent, 1)} | ${fixed(s.spansPerRequest, 2)} |`);
  }
  return lines.join('\n');
}

module.exports = { summarise, markdown, roundsTable };
