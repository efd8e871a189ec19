'use strict';
// Before a server reports ready, it serves a few requests to itself with a handler that reads
// the thread's record back (what an eBPF sampler would see) after resumptions, so a benchmark
// never measures a mode that is not wired in. Async tracking must show the active span after an
// await; the cheap mode may show none there but never a wrong span.

const http = require('node:http');

const CHECK_REQUESTS = 20;

function createRecordChecker(modeName) {
  const { trace } = require('@opentelemetry/api');
  const { getSpanContext } = require(require('../lib/package-copy').PACKAGE_DIR);
  const result = { checks: 0, mismatches: [] };
  function check(where) {
    result.checks++;
    const active = trace.getActiveSpan();
    const expected = active === undefined ? null : active.spanContext();
    const seen = getSpanContext();
    const same = expected !== null && seen !== null &&
      seen.traceId === expected.traceId && seen.spanId === expected.spanId;
    const allowed = same || (modeName === 'tcm-cheap' && seen === null);
    if (!allowed && result.mismatches.length < 5) {
      result.mismatches.push(`${where}: expected ${expected && expected.spanId}, record shows ${seen && seen.spanId}`);
    }
  }
  return { check, result };
}

// Wraps inChildSpan so the record is checked after the awaits inside and after the child span.
function checkingChildSpan(inChildSpan, check) {
  return async (name, fn) => {
    const value = await inChildSpan(name, async () => {
      const inner = await fn();
      check('after an await in the child span');
      return inner;
    });
    check('after the child span, back in the server span');
    return value;
  };
}

function get(port, path) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    }).on('error', reject);
  });
}

async function selfRequests(port) {
  for (let i = 0; i < CHECK_REQUESTS; i++) {
    const status = await get(port, `/api/users?id=${i}`);
    if (status !== 200) throw new Error(`self-check request: expected status 200, got ${status}`);
  }
}

module.exports = { createRecordChecker, checkingChildSpan, selfRequests };
