'use strict';
// Markdown for the span workload: per Node version, each mode's thread CPU per request and its
// ratio to stock and to the floor (median of per-round ratios, bootstrap 95 % interval; "(noise)"
// when the interval contains 1), plus a summary across versions.

const { modeByName } = require('./modes');
const { median, spread, pairedRatio, pairedDifference } = require('../lib/stats');
const { fixed, interval, utcMinute } = require('../lib/format');

const cpu = (s) => s.threadCpuNsPerRequest;

function callbacksPerRequest(calibration) {
  return calibration.asyncHooksBeforePerRequest + calibration.promiseHooksBeforePerRequest;
}

function describeCalibration(c) {
  const parts = [`${fixed(c.asyncHooksBeforePerRequest, 1)} async_hooks \`before\``];
  if (c.promiseHooksBeforePerRequest > 0) parts.push(`${fixed(c.promiseHooksBeforePerRequest, 1)} v8.promiseHooks \`before\``);
  if (c.initPerRequest > 0) parts.push(`${fixed(c.initPerRequest, 1)} async_hooks \`init\``);
  return parts.join(' + ');
}

function markdown(result, run) {
  const { config, machine } = result;
  const steal = spread(run.samples.map((s) => s.stealPercent ?? 0));
  const waited = median(run.samples.map((s) => s.threadWaitNsPerRequest / s.threadCpuNsPerRequest));
  const callbacks = callbacksPerRequest(run.calibration);
  const mechanism = run.samples.find((s) => s.mechanism !== 'AsyncLocalStorage')?.mechanism ?? '–';
  const lines = [];
  lines.push(`### Span workload — Node ${run.node}, ${utcMinute(run.startedAt)}`);
  lines.push('');
  lines.push(`Machine: ${machine.nproc} × ${machine.cpuModel}, ${machine.kernel}. ` +
    `${config.cpu === null ? 'Not pinned' : `Pinned to CPU ${config.cpu}`}; ${config.rounds} rounds × ${config.requests} requests ` +
    `(after ${config.warmup} warm-up), ${config.inFlight} in flight; modes alternated (order rotating) in fresh processes ` +
    `(${((new Date(run.finishedAt) - new Date(run.startedAt)) / 60000).toFixed(1)} min). ` +
    `Load average ${run.loadBefore.join(' / ')} before, ${run.loadAfter.join(' / ')} after; steal per round median ` +
    `${fixed(steal.median, 1)} % (max ${fixed(steal.max, 1)} %); the thread waited for a CPU ${fixed(waited, 2)} × its CPU time (median).`);
  lines.push(`Hooks (\`${mechanism}\`): ${describeCalibration(run.calibration)} per request.`);
  lines.push('');
  lines.push('| mode | thread CPU µs/req | ÷ stock, median [95 % CI] | ÷ floor, median [95 % CI] | added ns/req over stock [95 % CI] | added ns per callback |');
  lines.push('|---|---:|---|---|---|---:|');
  for (const name of run.modes) {
    const own = run.samples.filter((s) => s.mode === name);
    const vsStock = name === 'stock' ? null : pairedRatio(run.samples, name, 'stock', cpu);
    const vsFloor = name === 'stock' || name === 'floor' ? null : pairedRatio(run.samples, name, 'floor', cpu);
    const added = name === 'stock' ? null : pairedDifference(run.samples, name, 'stock', cpu);
    lines.push(`| ${name}: ${modeByName(name).label} | ${fixed(median(own.map(cpu)) / 1000, 2)} | ` +
      `${name === 'stock' ? '1 (base)' : interval(vsStock)} | ${name === 'floor' ? '1 (base)' : interval(vsFloor)} | ` +
      `${added === null ? '–' : interval(added, 0, { sign: true })} | ${added === null ? '–' : fixed(added.median / callbacks, 1)} |`);
  }
  // Before/after in one run: the working tree's manager against each rev:REV mode.
  for (const name of run.modes.filter((m) => m.startsWith('rev:') && run.modes.includes('full'))) {
    lines.push('', `full ÷ ${name} (after ÷ before), median [95 % CI]: ${interval(pairedRatio(run.samples, 'full', name, cpu))}; ` +
      `added ns/req: ${interval(pairedDifference(run.samples, 'full', name, cpu), 0, { sign: true })}.`);
  }
  for (const name of run.modes.filter((m) => m.startsWith('nodejs@rev:') && run.modes.includes('nodejs'))) {
    lines.push('', `nodejs ÷ ${name} (after ÷ before), median [95 % CI]: ${interval(pairedRatio(run.samples, 'nodejs', name, cpu))}; ` +
      `added ns/req: ${interval(pairedDifference(run.samples, 'nodejs', name, cpu), 0, { sign: true })}.`);
  }
  lines.push('');
  lines.push(`Command: \`${result.command}\` at ${result.revision}. Thread CPU = the event-loop thread's ` +
    'scheduler run time (/proc/thread-self/schedstat) over the measured requests; ratios are per round (modes of one round ' +
    'ran next to each other), median over rounds, 95 % percentile-bootstrap interval; "(noise)": the interval contains 1 (or 0).');
  return lines.join('\n');
}

function summaryTable(result) {
  const runs = result.runs;
  const others = [...new Set(runs.flatMap((r) => r.modes))].filter((m) => m !== 'stock' && m !== 'floor');
  const { machine, config } = result;
  const lines = [`#### Span workload, all versions — ${utcMinute(runs[0].startedAt)} (${config.rounds} rounds each; median [95 % CI])`, ''];
  lines.push(`Machine: ${machine.nproc} × ${machine.cpuModel}, ${machine.kernel}; ${config.cpu === null ? 'not pinned' : `pinned to CPU ${config.cpu}`}, ` +
    `${config.requests} requests per process after ${config.warmup} warm-up, ${config.inFlight} in flight; event-loop thread CPU per request, per-round ratios.`, '');
  lines.push(`| Node | mechanism | callbacks/req | stock µs/req | floor ÷ stock | ${others.map((m) => `${m} ÷ stock | ${m} ÷ floor`).join(' | ')} |`);
  lines.push(`|---|---|---:|---:|---|${others.map(() => '---|---|').join('')}`);
  for (const run of runs) {
    const stock = median(run.samples.filter((s) => s.mode === 'stock').map(cpu));
    const mechanism = run.samples.find((s) => s.mechanism !== 'AsyncLocalStorage')?.mechanism ?? '–';
    const cells = others.map((m) => (run.modes.includes(m)
      ? `${interval(pairedRatio(run.samples, m, 'stock', cpu))} | ${interval(pairedRatio(run.samples, m, 'floor', cpu))}` : '– | –'));
    lines.push(`| ${run.node} | ${mechanism} | ${fixed(callbacksPerRequest(run.calibration), 1)} | ${fixed(stock / 1000, 2)} | ` +
      `${interval(pairedRatio(run.samples, 'floor', 'stock', cpu))} | ${cells.join(' | ')} |`);
  }
  lines.push('');
  lines.push(`Command: \`${result.command}\` at ${result.revision}.`);
  return lines.join('\n');
}

function roundsTable(run) {
  const lines = [`| round | mode | thread CPU µs/req | waited µs/req | process CPU µs/req | wall µs/req | steal % |`, '|---:|---|---:|---:|---:|---:|---:|'];
  for (const s of run.samples) {
    lines.push(`| ${s.round} | ${s.mode} | ${fixed(s.threadCpuNsPerRequest / 1000, 2)} | ${fixed(s.threadWaitNsPerRequest / 1000, 1)} | ` +
      `${fixed(s.processCpuNsPerRequest / 1000, 2)} | ${fixed(s.wallNsPerRequest / 1000, 1)} | ${s.stealPercent === null ? '–' : fixed(s.stealPercent, 1)} |`);
  }
  return lines.join('\n');
}

module.exports = { markdown, summaryTable, roundsTable };
