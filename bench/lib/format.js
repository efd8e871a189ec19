'use strict';
// Number formatting shared by the benchmark reports (markdown tables pasted into READMEs).

function fixed(value, digits) {
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function signed(value, digits) {
  return `${value >= 0 ? '+' : '−'}${fixed(Math.abs(value), digits)}`;
}

/** "1.034 [1.021–1.047]", with " (noise)" when the interval contains the null value. */
function interval(summary, digits = 3, { sign = false } = {}) {
  if (summary === null) return '–';
  const f = sign ? (v) => signed(v, digits) : (v) => fixed(v, digits);
  return `${f(summary.median)} [${f(summary.lo)} … ${f(summary.hi)}]${summary.inNoise ? ' (noise)' : ''}`;
}

function utcMinute(date) {
  return new Date(date).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
}

module.exports = { fixed, signed, interval, utcMinute };
