'use strict';
// The OTEP 4719 process context, JS side: builds the resource attributes (from an OpenTelemetry
// Resource, or from OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES) and hands them to the addon,
// which owns the one OTEL_CTX mapping of the process (shared by all threads) and keeps the payload
// within what readers accept. Also the attribute key map (threadlocal.attribute_key_map):
// process-wide, append-only; a key's index is the key byte of the record's attrs-data.
//
// Nothing here may hurt the host: a resource attribute that cannot be published (NaN, an object,
// too long, over the payload budget) is left out with one process warning per publish, and
// asynchronous resource attributes are awaited in a chain that cannot reject.

const native = require('../native/addon');
const { withBigintJson } = require('../bigint-json');
const { MAX_KEYS } = require('../record/layout');
const { describe } = require('../describe');

// threadlocal.schema_version is defined once, in the addon (SCHEMA_VERSION in
// src/process_ctx/mod.rs); processContextInfo().schemaVersion reports it.
const MAX_KEY_BYTES = 255;
const MAX_KEY_MAP_BYTES = 4096; // all keys together: the map is in every process context
const WARNING_CODE = 'OTEL_THREAD_CTX_PROCESS_CONTEXT';

// OTEL_RESOURCE_ATTRIBUTES: comma-separated key=value, values percent-encoded (OTel spec).
// Malformed pairs are skipped, as the SDK's env detector does.
function parseResourceAttributesEnv(text) {
  const attrs = {};
  if (typeof text !== 'string' || text.trim() === '') return attrs;
  for (const pair of text.split(',')) {
    const eq = pair.indexOf('=');
    if (eq <= 0) continue;
    const key = pair.slice(0, eq).trim();
    let value = pair.slice(eq + 1).trim();
    try {
      value = decodeURIComponent(value);
    } catch {
      continue;
    }
    if (key !== '') attrs[key] = value;
  }
  return attrs;
}

function sdkInfo() {
  try {
    const { SDK_INFO } = require('@opentelemetry/core');
    return { ...SDK_INFO };
  } catch {
    return { 'telemetry.sdk.name': 'opentelemetry', 'telemetry.sdk.language': 'nodejs' };
  }
}

function attributesFromEnv(env) {
  const attrs = parseResourceAttributesEnv(env.OTEL_RESOURCE_ATTRIBUTES);
  if (typeof env.OTEL_SERVICE_NAME === 'string' && env.OTEL_SERVICE_NAME !== '') attrs['service.name'] = env.OTEL_SERVICE_NAME;
  return attrs;
}

/** Throws a TypeError unless `resource` is an OpenTelemetry Resource (1.x class or 2.x object). */
function checkResource(resource, arg) {
  if (resource === null || typeof resource !== 'object' || Array.isArray(resource)) {
    throw new TypeError(`${arg}: expected an OpenTelemetry Resource (an object with an attributes object), got ${describe(resource)}`);
  }
  // SDK 2.x resources log an error when `attributes` is read before async detectors settle.
  if (typeof resource.getRawAttributes === 'function') return;
  const attrs = resource.attributes;
  if (attrs === null || typeof attrs !== 'object' || Array.isArray(attrs)) {
    throw new TypeError(`${arg}.attributes: expected an object of resource attributes, got ${describe(attrs)}`);
  }
}

// A Resource's settled attributes. While SDK 2.x detectors are still running, reading
// `attributes` logs an error, so the settled raw attributes are taken instead (first one of a
// key wins, as the SDK merges them).
function settledAttributes(resource) {
  if (resource.asyncAttributesPending === true && typeof resource.getRawAttributes === 'function') {
    const attrs = {};
    for (const pair of resource.getRawAttributes()) {
      if (!Array.isArray(pair)) continue;
      const [key, value] = pair;
      if (value != null && typeof value.then !== 'function' && !(key in attrs)) attrs[key] = value;
    }
    return attrs;
  }
  const attrs = resource.attributes;
  return attrs !== null && typeof attrs === 'object' ? attrs : {};
}

// One attribute value in the form the addon takes (string, number, boolean or string[]), or a
// reason why it cannot be published.
function publishable(value) {
  if (typeof value === 'string' || typeof value === 'boolean') return { value };
  if (typeof value === 'number') return Number.isFinite(value) ? { value } : { reason: `not a finite number (${value})` };
  if (Array.isArray(value)) {
    const out = [];
    for (const v of value) {
      if (v === null || v === undefined) continue;
      if (typeof v === 'string') out.push(v);
      else if ((typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean') out.push(String(v));
      else return { reason: `an array holding ${describe(v)}` };
    }
    return { value: out };
  }
  return { reason: `not a string, number, boolean or array (${describe(value)})` };
}

// The SDK's service.name when nothing configured one: unknown_service:<process>.
function isPlaceholderServiceName(value) {
  return typeof value === 'string' && value.startsWith('unknown_service');
}

/**
 * The resource attributes to publish: the Resource's over the environment's
 * (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME), which fill in what the Resource lacks and replace
 * its unknown_service placeholder (a NodeTracerProvider without NodeSDK's detectors ignores
 * OTEL_SERVICE_NAME; the OpenTelemetry eBPF profiler merges the environment the same way); plus
 * service.name (unknown_service:node), telemetry.sdk.* and process.pid when absent.
 * service.instance.id is added by the addon (generated once per process) when absent.
 * @returns {{ attrs: Array<{ key: string, value: string | number | boolean | string[] }>,
 *   dropped: Array<{ key: string, reason: string }> }}
 */
function buildResourceAttributes(resource, env = process.env) {
  const fromEnv = attributesFromEnv(env);
  const given = resource === undefined ? {} : settledAttributes(resource);
  const attrs = new Map();
  const dropped = [];
  for (const source of [given, fromEnv]) {
    for (const key of Object.keys(source)) {
      const value = source[key];
      if (value === undefined || value === null || key === '' || attrs.has(key)) continue;
      if (key === 'service.name' && source === given && isPlaceholderServiceName(value) && fromEnv[key] !== undefined) continue;
      const p = publishable(value);
      if (p.reason !== undefined) dropped.push({ key, reason: p.reason });
      else attrs.set(key, p.value);
    }
  }
  if (!attrs.has('service.name')) {
    attrs.set('service.name', env.OTEL_SERVICE_NAME || `unknown_service:${process.argv0 || 'node'}`);
  }
  for (const [key, value] of Object.entries(sdkInfo())) if (!attrs.has(key)) attrs.set(key, value);
  if (!attrs.has('process.pid')) attrs.set('process.pid', process.pid);
  return { attrs: [...attrs].map(([key, value]) => ({ key, value })), dropped };
}

// The addon reports bad arguments with code 'InvalidArg'; JS callers get a RangeError.
function callNative(fn, ...args) {
  try {
    return fn(...args);
  } catch (err) {
    if (err && err.code === 'InvalidArg') throw new RangeError(err.message);
    throw err;
  }
}

function warnDropped(dropped) {
  if (dropped.length === 0) return;
  const list = dropped.slice(0, 10).map((d) => `${d.key}: ${d.reason}`).join('; ');
  const more = dropped.length > 10 ? `; and ${dropped.length - 10} more` : '';
  process.emitWarning(`otel-thread-ctx: ${dropped.length} resource attribute(s) left out of the process context (${list}${more})`,
    { code: WARNING_CODE });
}

// The resource this thread asked to publish last: async attributes that settle later republish
// only if nothing newer was published in between.
let latestResource;
let warnedAsync = false;

/**
 * Publishes `resource` (undefined: the environment's attributes) as the process context. `origin`
 * says where it came from: 'environment', 'sdk' (followed from spans) or 'explicit' (given by the
 * app), so that an explicit resource is never replaced by one followed from spans. Unpublishable
 * attributes are left out with a warning. Returns the addon's info (null without the addon).
 */
function publishResource(resource, origin) {
  latestResource = resource;
  const { attrs, dropped } = buildResourceAttributes(resource);
  if (!native.supported) return null;
  const result = callNative(native.publishProcessContext, attrs, origin, dropped.length);
  warnDropped([...dropped, ...result.dropped]);
  if (resource !== undefined && resource.asyncAttributesPending === true && typeof resource.waitForAsyncAttributes === 'function') {
    republishWhenSettled(resource, origin);
  }
  return withBigintJson(result.info);
}

// Detectors still running: publish again once they settle. The chain ends in handlers that
// catch everything, so nothing can reject unhandled into the host.
function republishWhenSettled(resource, origin) {
  Promise.resolve()
    .then(() => resource.waitForAsyncAttributes())
    .then(() => {
      if (latestResource === resource) publishResource(resource, origin);
    })
    .catch((error) => {
      if (warnedAsync) return;
      warnedAsync = true;
      process.emitWarning('otel-thread-ctx: the process context could not take the resource\'s asynchronous ' +
        `attributes (${error && error.message}); it keeps the attributes that had settled`, { code: WARNING_CODE });
    });
}

/**
 * (Re)publishes the process context with the resource's attributes (or the environment's).
 * Without the native addon: a no-op returning null.
 * @param {{ resource?: object }} [options]
 */
function publishProcessContext(options = {}) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`options: expected an object, got ${describe(options)}`);
  }
  const unknown = Object.keys(options).filter((k) => k !== 'resource');
  if (unknown.length > 0) throw new TypeError(`options.${unknown[0]}: unknown option (expected resource)`);
  if (options.resource !== undefined) checkResource(options.resource, 'options.resource');
  return publishResource(options.resource, options.resource === undefined ? 'environment' : 'explicit');
}

/** Facts about the published OTEL_CTX mapping, or null before the first publish (or unsupported). */
function processContextInfo() {
  return native.supported ? withBigintJson(native.processContextInfo()) : null;
}

// The key map, mirrored per thread. Append-only, so its length tells whether the mirror is stale
// (another thread may have appended). Without the addon the map lives here only.
let keys = [];
const indexByKey = new Map();

// The process-wide count read in place (a typed-array load, where a call cost ~170 instructions
// per span, callgrind, span workload, Node 24); the call where the runtime allows no external
// ArrayBuffer.
const keyCountView = native.supported && typeof native.keyCountView === 'function' ? native.keyCountView() : null;

function keyCount() {
  return keyCountView !== null ? keyCountView[0] : native.attributeKeyCount();
}

function syncKeys() {
  if (!native.supported || keyCount() === keys.length) return;
  keys = native.attributeKeyMap();
  indexByKey.clear();
  keys.forEach((k, i) => indexByKey.set(k, i));
}

/** Validates a list of attribute keys (before anything changes). */
function checkKeys(list, arg = 'attributes') {
  if (!Array.isArray(list)) throw new TypeError(`${arg}: expected an array of attribute key strings, got ${describe(list)}`);
  const seen = new Map();
  list.forEach((key, i) => {
    if (typeof key !== 'string') throw new TypeError(`${arg}[${i}]: expected a string key, got ${describe(key)}`);
    if (key === '') throw new RangeError(`${arg}[${i}]: expected a non-empty key, got ""`);
    const bytes = Buffer.byteLength(key, 'utf8');
    if (bytes > MAX_KEY_BYTES) throw new RangeError(`${arg}[${i}]: expected a key of at most ${MAX_KEY_BYTES} UTF-8 bytes, got ${bytes}`);
    if (seen.has(key)) throw new RangeError(`${arg}[${i}]: duplicate key ${JSON.stringify(key)} (also at index ${seen.get(key)})`);
    seen.set(key, i);
  });
  syncKeys();
  const added = list.filter((k) => !indexByKey.has(k));
  if (keys.length + added.length > MAX_KEYS) {
    throw new RangeError(`${arg}: expected at most ${MAX_KEYS} keys in the attribute key map, ` +
      `got ${keys.length + added.length} (${keys.length} registered + ${added.length} new)`);
  }
  const total = [...keys, ...added].reduce((n, k) => n + Buffer.byteLength(k, 'utf8'), 0);
  if (total > MAX_KEY_MAP_BYTES) {
    throw new RangeError(`${arg}: expected at most ${MAX_KEY_MAP_BYTES} UTF-8 bytes of keys in the attribute key map, ` +
      `got ${total} (it is published in every process context)`);
  }
}

/**
 * Appends keys to the process-wide attribute key map (keys already there keep their index) and
 * republishes the process context (published first from the environment if it was not yet).
 * @param {string[]} list
 * @returns {number[]} each key's index, the key byte in record attrs-data
 */
function registerAttributeKeys(list, arg = 'attributes') {
  checkKeys(list, arg);
  if (!native.supported) {
    for (const k of list) if (!indexByKey.has(k)) indexByKey.set(k, keys.push(k) - 1);
    return list.map((k) => indexByKey.get(k));
  }
  if (native.processContextInfo() === null) publishResource(undefined, 'environment');
  const result = callNative(native.appendAttributeKeys, list);
  syncKeys();
  warnDropped(result.dropped); // a longer key map leaves less of the payload to the resource
  return result.indices;
}

/**
 * The process-context part of register() and of ThreadContextManager's options: validates
 * `resource` and `attributes` now (throwing before anything changes) and returns the function
 * that publishes them. The resource is published when given, or (from the environment) when the
 * process has no context yet, so a worker keeps what the main thread published. That function
 * runs inside enable() (in NodeSDK.start()): what fails there (the mapping refused, another
 * thread filled the key map since) is a warning, never a throw.
 */
function prepareProcessContext({ resource, attributes }, arg = 'options') {
  if (resource !== undefined) checkResource(resource, `${arg}.resource`);
  if (attributes !== undefined) checkKeys(attributes, `${arg}.attributes`);
  return function commitProcessContext() {
    try {
      if (resource !== undefined) publishResource(resource, 'explicit');
      else if (processContextInfo() === null) publishResource(undefined, 'environment');
      if (attributes !== undefined) registerAttributeKeys(attributes, `${arg}.attributes`);
    } catch (error) {
      process.emitWarning(`otel-thread-ctx: could not publish the process context (${error && error.message})`, { code: WARNING_CODE });
    }
  };
}

/**
 * Announces the thread-context schema readers should use, as its threadlocal.schema_version
 * ('tlsdesc_v1_dev' or 'tls_v1' for the TLS record, 'nodejs_v1_dev'): republished at once when a
 * context is already published, else with the first publish. Process-wide: the last enabled
 * context manager's schema. Runs inside enable(): a failure is a warning.
 */
function announceSchema(schemaVersion) {
  if (!native.supported || typeof native.setThreadContextSchema !== 'function') return;
  try {
    callNative(native.setThreadContextSchema, schemaVersion);
  } catch (error) {
    process.emitWarning(`otel-thread-ctx: could not announce schema ${schemaVersion} in the process context (${error && error.message})`,
      { code: WARNING_CODE });
  }
}

/** Where the published resource came from ('environment', 'sdk', 'explicit'), or null. */
function publishedOrigin() {
  const info = native.supported ? native.processContextInfo() : null;
  return info === null ? null : info.origin;
}

/** The attribute key map (index = key byte), as published. */
function attributeKeyMap() {
  syncKeys();
  return keys.slice();
}

/** The index of a registered key, or undefined. */
function keyIndex(key) {
  syncKeys();
  return indexByKey.get(key);
}

/** The index of a key in this thread's mirror of the map, without asking the addon. */
function cachedKeyIndex(key) {
  return indexByKey.get(key);
}

/** The registered keys, in index order (the array is replaced, never changed, when keys are added). */
function registeredKeys() {
  syncKeys();
  return keys;
}

module.exports = {
  announceSchema,
  attributeKeyMap,
  cachedKeyIndex,
  keyIndex,
  prepareProcessContext,
  processContextInfo,
  publishProcessContext,
  publishResource,
  publishedOrigin,
  registerAttributeKeys,
  registeredKeys,
  settledAttributes,
};
