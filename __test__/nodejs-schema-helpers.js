'use strict';
// Shared by the nodejs-schema*.test.js files: whether this runtime should run schema 'nodejs'
// (AsyncContextFrame on, and an ABI the V8 addon is built for), and the skip reason where not.
// The package feature-detects; the tests know from the version and flags what to expect, so that
// a runtime that should have the schema and falls back fails instead of skipping.

process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
const major = Number(process.versions.node.split('.')[0]);
const flags = [...process.execArgv, ...(process.env.NODE_OPTIONS || '').split(/\s+/)];

const expectAcf = (major >= 24 && !flags.includes('--no-async-context-frame')) ||
  (major === 22 && flags.includes('--experimental-async-context-frame'));
const expectNodejs = expectAcf && [22, 24, 26].includes(major);
const skipNodejs = expectNodejs ? false
  : `schema 'nodejs' needs AsyncContextFrame (Node 24+, or 22 with --experimental-async-context-frame); Node ${process.versions.node} ${flags.filter(Boolean).join(' ')}`.trim();

module.exports = { expectNodejs, skipNodejs, major };
