'use strict';
// The OTEP 4719 process context, JS side: builds the resource attributes (from an OpenTelemetry
// Resource, or from OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES), validates, and hands them to
// the addon, which owns the one OTEL_CTX mapping of the process (shared by all threads).
// Also the attribute key map (threadlocal.attribute_key_map): process-wide, append-only, at
// most 256 keys; a key's index is the key byte of the record's attrs-data.

const native = require('./native');

// threadlocal.schema_version is defined once, in the addon (src/process_ctx/mod.rs SCHEMA_VERSION);
// processContextInfo().schemaVersion reports it.
const MAX_KEYS = 256;

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `string ${JSON.stringify(value)}`;
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

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

// An OTel Resource (1.x class or 2.x object): its `attributes`; anything else is a TypeError.
function attributesOfResource(resource) {
  if (resource === null || typeof resource !== 'object' || resource.attributes === null ||
      typeof resource.attributes !== 'object' || Array.isArray(resource.attributes)) {
    throw new TypeError(`options.resource: expected an OpenTelemetry Resource (an object with an attributes object), got ${describe(resource)}`);
  }
  return resource.attributes;
}

// One attribute value in the form the addon takes: string, number, boolean or string[].
function checkValue(key, value) {
  const where = `options.resource.attributes[${JSON.stringify(key)}]`;
  if (typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new RangeError(`${where}: expected a finite number, got ${value}`);
    return value;
  }
  if (Array.isArray(value)) {
    return value.filter((v) => v !== null && v !== undefined).map((v, i) => {
      if (typeof v === 'string') return v;
      if (typeof v === 'number' || typeof v === 'boolean') return String(v);
      throw new TypeError(`${where}[${i}]: expected a string, number or boolean, got ${describe(v)}`);
    });
  }
  throw new TypeError(`${where}: expected a string, number, boolean or array, got ${describe(value)}`);
}

/**
 * The resource attributes to publish: the Resource's (or the environment's), plus service.name
 * (OTEL_SERVICE_NAME or unknown_service:node), telemetry.sdk.* and process.pid when absent.
 * service.instance.id is added by the addon (generated once per process) when absent.
 * @returns {Array<{ key: string, value: string | number | boolean | string[] }>}
 */
function buildResourceAttributes(resource, env = process.env) {
  const given = resource === undefined ? attributesFromEnv(env) : attributesOfResource(resource);
  const attrs = new Map();
  for (const key of Object.keys(given)) {
    const value = given[key];
    if (value === undefined || value === null) continue;
    if (key === '') throw new RangeError('options.resource.attributes: expected non-empty keys, got ""');
    attrs.set(key, checkValue(key, value));
  }
  if (!attrs.has('service.name')) {
    attrs.set('service.name', env.OTEL_SERVICE_NAME || `unknown_service:${process.argv0 || 'node'}`);
  }
  for (const [key, value] of Object.entries(sdkInfo())) if (!attrs.has(key)) attrs.set(key, value);
  if (!attrs.has('process.pid')) attrs.set('process.pid', process.pid);
  return [...attrs].map(([key, value]) => ({ key, value }));
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

/**
 * (Re)publishes the process context with the resource's attributes (or the environment's).
 * Without the native addon: a no-op returning null.
 * @param {{ resource?: object }} [options]
 */
function publishProcessContext(options = {}) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`options: expected an object, got ${describe(options)}`);
  }
  const attrs = buildResourceAttributes(options.resource);
  if (!native.supported) return null;
  const info = callNative(native.publishProcessContext, attrs);
  // A Resource whose detectors are still running: publish again once they settle.
  const { resource } = options;
  if (resource && resource.asyncAttributesPending && typeof resource.waitForAsyncAttributes === 'function') {
    resource.waitForAsyncAttributes().then(() => publishProcessContext(options), () => {});
  }
  return info;
}

/** Facts about the published OTEL_CTX mapping, or null before the first publish (or unsupported). */
function processContextInfo() {
  return native.supported ? native.processContextInfo() : null;
}

// The key map, mirrored per thread. Append-only, so its length tells whether the mirror is stale
// (another thread may have appended). Without the addon the map lives here only.
let keys = [];
const indexByKey = new Map();

function syncKeys() {
  if (!native.supported || native.attributeKeyCount() === keys.length) return;
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
    if (seen.has(key)) throw new RangeError(`${arg}[${i}]: duplicate key ${JSON.stringify(key)} (also at index ${seen.get(key)})`);
    seen.set(key, i);
  });
  syncKeys();
  const added = list.filter((k) => !indexByKey.has(k)).length;
  if (keys.length + added > MAX_KEYS) {
    throw new RangeError(`${arg}: expected at most ${MAX_KEYS} keys in the attribute key map, ` +
      `got ${keys.length + added} (${keys.length} registered + ${added} new)`);
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
  if (native.processContextInfo() === null) publishProcessContext();
  const indices = callNative(native.appendAttributeKeys, list);
  syncKeys();
  return indices;
}

/**
 * register()'s part: validates `options.resource` and `options.attributes` now (throwing before
 * anything changes) and returns the function that publishes them. The resource is published
 * when given, or when the process has no context yet (a worker's register() keeps the main
 * thread's); attributes are appended to the key map.
 */
function prepareProcessContext(options) {
  const { resource, attributes } = options;
  buildResourceAttributes(resource);
  if (attributes !== undefined) checkKeys(attributes, 'options.attributes');
  return function commitProcessContext() {
    if (resource !== undefined || processContextInfo() === null) publishProcessContext({ resource });
    if (attributes !== undefined) registerAttributeKeys(attributes, 'options.attributes');
  };
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
  MAX_KEYS,
  attributeKeyMap,
  buildResourceAttributes,
  cachedKeyIndex,
  checkKeys,
  keyIndex,
  parseResourceAttributesEnv,
  prepareProcessContext,
  processContextInfo,
  publishProcessContext,
  registerAttributeKeys,
  registeredKeys,
};
