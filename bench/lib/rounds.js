'use strict';
// Alternation: every round measures every mode once, each in a fresh process, so that slow
// phases of a noisy machine hit all modes alike; the order rotates by one each round so that no
// mode always runs first (after a pause) or right after the same neighbour.

/**
 * @param rounds number of rounds
 * @param modes mode names, in the first round's order
 * @param measure async (mode, round) => sample (an object; `round` and `mode` are added)
 * @param onSample optional (sample) => void, e.g. progress on stderr
 * @returns the samples in the order measured
 */
async function alternate({ rounds, modes, measure, onSample = () => {} }) {
  const samples = [];
  for (let round = 1; round <= rounds; round++) {
    const shift = (round - 1) % modes.length;
    const order = [...modes.slice(shift), ...modes.slice(0, shift)];
    for (const mode of order) {
      const sample = { ...(await measure(mode, round)), round, mode };
      samples.push(sample);
      onSample(sample);
    }
  }
  return samples;
}

module.exports = { alternate };
