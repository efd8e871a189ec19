'use strict';
// Small order statistics for the per-round samples.

function sorted(values) {
  if (values.length === 0) throw new RangeError('values: expected at least one sample, got none');
  return [...values].sort((x, y) => x - y);
}

function median(values) {
  const s = sorted(values);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

function spread(values) {
  const s = sorted(values);
  return { median: median(s), min: s[0], max: s[s.length - 1] };
}

module.exports = { median, spread };
