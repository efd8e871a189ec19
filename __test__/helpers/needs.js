'use strict';
// One rule for every test that needs what a machine may lack (root, eBPF, gdb, protoc, a Node
// version, a built binary): where it is missing the test is skipped and says why; with
// REQUIRE_EBPF=1 (.ci/run exports it) it runs and fails, saying why. A skip is node:test's skip
// (the option, or t.skip()), never a test that returns early and so passes.
//
//   const need = needs(hasGdb ? false : 'gdb is not installed');
//   test('...', { skip: need.skip }, need.guard(async (t) => { ... }));
//
// Inside a test that finds out late (`if (!canRun(t, why)) return;`), canRun() skips it with
// t.skip() or, under REQUIRE_EBPF=1, throws.

const required = process.env.REQUIRE_EBPF === '1';

/** The failure of a test that cannot run here while REQUIRE_EBPF=1. */
function requiredError(missing) {
  return new Error(`REQUIRE_EBPF=1, but ${missing}`);
}

/**
 * For a test that cannot run for `missing` (a reason), or can (false): `skip`, node:test's option
 * (the reason, when skipped), and `guard(fn)`, the test's body (one that fails with the reason
 * when REQUIRE_EBPF=1 and it cannot run).
 */
function needs(missing) {
  if (!missing) return { skip: false, guard: (fn) => fn };
  if (!required) return { skip: missing, guard: (fn) => fn };
  return { skip: false, guard: () => () => { throw requiredError(missing); } };
}

/** Whether the test `t` can go on: `missing` false; else it is skipped (t.skip) or, required, fails. */
function canRun(t, missing) {
  if (!missing) return true;
  if (required) throw requiredError(missing);
  t.skip(missing);
  return false;
}

module.exports = { needs, canRun, required };
