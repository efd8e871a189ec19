'use strict';
// The service benchmark's checks on a server, the same whether it is timed (run.js) or counted
// (instructions.js): the manager modes' record self-check passed, and the spans were exported.

const { modeByName } = require('./modes');

/** Throws unless a manager mode's self-check ran and found the record right (ready message). */
function checkSelfCheck(mode, ready) {
  const { selfCheck } = ready;
  if (selfCheck !== null && (selfCheck.checks === 0 || selfCheck.mismatches.length > 0)) {
    throw new Error(`mode ${mode}: the record self-check failed after ${selfCheck.checks} queries: ${selfCheck.mismatches.join('; ')}`);
  }
}

/** Spans exported per request (stopped message); throws when an instrumented mode exported too few. */
function spansPerRequest(mode, stopped) {
  const spans = stopped.spansExported / stopped.totalRequests;
  // http server span + express middleware/handler spans + pg spans: several per request.
  if (modeByName(mode).kind !== null && spans < 3) {
    throw new Error(`mode ${mode}: expected at least 3 exported spans per request (http, express, pg), got ${spans.toFixed(2)}`);
  }
  return spans;
}

module.exports = { checkSelfCheck, spansPerRequest };
