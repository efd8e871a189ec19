'use strict';
// What a running Node process can do so that a profiler outside it (thread-ctx, perf, the
// OpenTelemetry eBPF profiler) names its JS frames. Measured on Node 18, 20, 22, 24 and 26
// (docs/source-lines.md):
// - The perf map (--perf-basic-prof-only-functions) and the jitdump (--perf-prof) can only be
//   turned on at startup: v8.setFlagsFromString() of either, at any point after it, writes no file.
//   So this module cannot switch them on; it says when they are missing (once per process).
// - --interpreted-frames-native-stack does work when set at run time, for every function compiled
//   afterwards (each gets its own copy of the interpreter's entry trampoline, named in the perf map
//   or jitdump): frames of code that never left the interpreter are named too. It is only set when a
//   perf map or jitdump is being written; without one it would cost memory for nothing.
// - V8 never deletes its perf map: /tmp/perf-PID.map stays after the process exits. With
//   removePerfMapOnExit the process deletes it when it exits normally.

const fs = require('node:fs');
const path = require('node:path');
const v8 = require('node:v8');
const { isMainThread } = require('node:worker_threads');
const { describe } = require('../describe');

const OPTIONS = ['warn', 'interpretedFrames', 'removePerfMapOnExit'];

let warned = false;
let interpretedFramesSet = false;
let removalInstalled = false;

/** V8 flags the process was started with (command line and NODE_OPTIONS), `_` spelled `-`. */
function startupFlags() {
  const fromEnv = (process.env.NODE_OPTIONS || '').split(/\s+/).filter(Boolean);
  return [...process.execArgv, ...fromEnv].filter((a) => a.startsWith('--')).map((a) => {
    const [name, ...value] = a.split('=');
    return { name: name.replace(/_/g, '-'), value: value.length ? value.join('=') : undefined };
  });
}

/**
 * Which JIT naming the process has, from its startup flags.
 * @returns {{ perfMap: boolean, jitdump: boolean, interpretedFrames: boolean, perfMapPath: string|null,
 *   jitdumpPath: string|null }}
 */
function jitNamesStatus() {
  const flags = startupFlags();
  const has = (name) => flags.some((f) => f.name === name);
  const valueOf = (name) => flags.filter((f) => f.name === name && f.value !== undefined).map((f) => f.value).pop();
  const perfMap = has('--perf-basic-prof') || has('--perf-basic-prof-only-functions');
  const jitdump = has('--perf-prof');
  const perfMapDir = valueOf('--perf-basic-prof-path') || '/tmp';
  const jitdumpDir = valueOf('--perf-prof-path') || process.cwd();
  return {
    perfMap,
    jitdump,
    interpretedFrames: has('--interpreted-frames-native-stack') || interpretedFramesSet,
    perfMapPath: perfMap ? path.join(perfMapDir, `perf-${process.pid}.map`) : null,
    jitdumpPath: jitdump ? path.join(jitdumpDir, `jit-${process.pid}.dump`) : null,
  };
}

/**
 * Validates enableJitNames' options: true (the defaults), false (nothing: for an option that
 * passes them through), or an object of booleans. Returns them as an object, or null for false.
 */
function checkJitNamesOptions(options, name = 'options') {
  if (options === true || options === undefined) return {};
  if (options === false) return null;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`${name}: expected a boolean or an object, got ${describe(options)}`);
  }
  for (const [key, value] of Object.entries(options)) {
    if (!OPTIONS.includes(key)) throw new TypeError(`${name}.${key}: unknown option (expected ${OPTIONS.join(', ')})`);
    if (typeof value !== 'boolean') throw new TypeError(`${name}.${key}: expected a boolean, got ${describe(value)}`);
  }
  return options;
}

/**
 * Does what a running process can so that outside profilers name its JS frames (see above).
 * Never throws once its options are valid: a failure to set a flag is in the result.
 * @param {boolean | { warn?: boolean, interpretedFrames?: boolean, removePerfMapOnExit?: boolean }} [options]
 *   false: nothing (the status only);
 *   warn (default true): one process warning when no perf map or jitdump is written;
 *   interpretedFrames (default true): --interpreted-frames-native-stack for code compiled from now on,
 *   when a perf map or jitdump is written; removePerfMapOnExit (default false): delete the perf map at exit.
 * @returns {ReturnType<typeof jitNamesStatus> & { problems: string[] }}
 */
function enableJitNames(options = true) {
  const checked = checkJitNamesOptions(options);
  if (checked === null) return { ...jitNamesStatus(), problems: [] };
  const { warn = true, interpretedFrames = true, removePerfMapOnExit = false } = checked;
  const problems = [];
  const status = jitNamesStatus();
  const named = status.perfMap || status.jitdump;
  if (named && interpretedFrames && !status.interpretedFrames) {
    try {
      v8.setFlagsFromString('--interpreted-frames-native-stack');
      interpretedFramesSet = true;
    } catch (e) {
      problems.push(`--interpreted-frames-native-stack could not be set: ${e && e.message}`);
    }
  }
  if (!named && warn && !warned) {
    warned = true;
    process.emitWarning(
      'JS frames of this process cannot be named by a profiler outside it: start node with ' +
      '--perf-basic-prof-only-functions (functions) or --perf-prof (lines; writes jit-PID.dump into ' +
      'the working directory); V8 can only turn them on at startup (NODE_OPTIONS works too)',
      { code: 'OTEL_THREAD_CTX_NO_JIT_NAMES' });
  }
  if (status.perfMap && removePerfMapOnExit && isMainThread && !removalInstalled) {
    removalInstalled = true;
    const file = status.perfMapPath;
    process.once('exit', () => {
      try {
        fs.unlinkSync(file);
      } catch {
        // Already gone, or not ours to delete: nothing to do at exit.
      }
    });
  }
  return { ...jitNamesStatus(), problems };
}

module.exports = { enableJitNames, jitNamesStatus, checkJitNamesOptions };
