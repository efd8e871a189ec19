'use strict';
// Turns the per-round samples into the markdown the README takes as is: per mode the median
// req/s, server CPU µs per request and p99 latency, and each mode's CPU per request relative to
// (a) as the median and min–max of the per-round ratios, plus the added ns per request.

const { MODES } = require('./modes');
const { median, spread } = require('./stats');

const BASE = 'a';
function fixed(value, digits) {
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function signed(value, digits) {
  return `${value >= 0 ? '+' : '−'}${fixed(Math.abs(value), digits)}`;
}

// Per round, the ratio and difference against (a) of the same round (adjacent in time).
function versusBase(samples, key) {
  const base = new Map(samples.filter((s) => s.modeKey === BASE).map((s) => [s.round, s]));
  const pairs = samples.filter((s) => s.modeKey === key && base.has(s.round))
    .map((s) => ({ ratio: s.cpuUsPerRequest / base.get(s.round).cpuUsPerRequest,
      addedNs: (s.cpuUsPerRequest - base.get(s.round).cpuUsPerRequest) * 1000 }));
  return { ratio: spread(pairs.map((p) => p.ratio)), addedNs: spread(pairs.map((p) => p.addedNs)) };
}

function summarise(samples, modeKeys) {
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
      versusBase: key === BASE || !modeKeys.includes(BASE) ? null : versusBase(samples, key),
    };
  });
}

function markdown({ summary, samples, config, machine, node, revision, startedAt, finishedAt, loadBefore, loadAfter, command }) {
  startedAt = new Date(startedAt);
  finishedAt = new Date(finishedAt);
  const foreign = spread(samples.map((s) => s.foreignPercent));
  const steal = spread(samples.map((s) => s.stealPercent));
  const lines = [];
  lines.push(`### HTTP overhead — Node ${node}, ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC`);
  lines.push('');
  lines.push(`Machine: ${machine.nproc} × ${machine.cpuModel} (nproc ${machine.nproc}), ${machine.kernel}. ` +
    `Server pinned to CPU ${config.serverCpu}, autocannon to CPU ${config.clientCpu}, 127.0.0.1, ` +
    `${config.connections} connections, ${config.rounds} rounds × ${config.duration} s measured ` +
    `(after ${config.warmup} s warm-up), modes alternated ${config.modes.join(' ')} in fresh processes ` +
    `(${((finishedAt - startedAt) / 60000).toFixed(1)} min).`);
  lines.push(`Load average (1/5/15 min): ${loadBefore.join(' / ')} before, ${loadAfter.join(' / ')} after. ` +
    `CPU ${config.serverCpu} busy time not charged to the server (other processes, interrupts) during the measured windows: median ` +
    `${fixed(foreign.median, 1)} % (max ${fixed(foreign.max, 1)} %), steal ${fixed(steal.median, 1)} % ` +
    `(max ${fixed(steal.max, 1)} %).`);
  lines.push('');
  lines.push('| mode | hook mechanism | req/s | server CPU µs/req | p99 latency ms | CPU/req vs (a): median (min–max of rounds) | added ns/req vs (a): median (min–max) |');
  lines.push('|---|---|---:|---:|---:|---|---|');
  for (const m of summary) {
    const vs = m.versusBase === null ? (m.key === BASE ? '1 (base)' : '–')
      : `${fixed(m.versusBase.ratio.median, 3)} (${fixed(m.versusBase.ratio.min, 3)}–${fixed(m.versusBase.ratio.max, 3)})`;
    const added = m.versusBase === null ? '–'
      : `${signed(m.versusBase.addedNs.median, 0)} (${signed(m.versusBase.addedNs.min, 0)} … ${signed(m.versusBase.addedNs.max, 0)})`;
    lines.push(`| ${m.label} | ${m.mechanism ?? '–'} | ${fixed(m.requestsPerSecond, 0)} | ` +
      `${fixed(m.cpuUsPerRequest, 1)} | ${fixed(m.latencyP99Ms, 0)} | ${vs} | ${added} |`);
  }
  lines.push('');
  lines.push(`Command: \`${command}\` at ${revision}. Medians over rounds; CPU = server process.cpuUsage() (user + system, ` +
    'all threads) over the measured window / requests served in it.');
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
