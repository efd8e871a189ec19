'use strict';
// ThreadContextManager, the class the package exports. Its constructor validates the options and
// chooses the manager's class by the thread-context schema it publishes with:
//   'tls'     the OTEP 4947 record behind otel_thread_ctx_v1, kept current at every async switch
//             (js/tls/context-manager.js): every OTEP 4947 reader, every Node version; this class;
//   'nodejs'  nodejs_v1_dev (js/nodejs/): the record hangs off the context and readers find it
//             through V8's AsyncContextFrame; nothing runs per switch; a FrameContextManager.
// 'nodejs' needs AsyncContextFrame and this Node ABI's V8 addon. Where either is missing, the
// manager publishes with 'tls' instead, with one warning per thread saying why
// (js/nodejs/availability.js): profiling correlation never stops a service from starting.
// The choice is made here, above both classes, so that neither schema's files import the other's
// manager: FrameContextManager extends TlsContextManager, and this class extends it too.

const { TlsContextManager } = require('../tls/context-manager');
const { FrameContextManager } = require('../nodejs/frame-context-manager');
const { nodejsSchema } = require('../nodejs/availability');
const { checkAllocations } = require('../profiling/allocations');
const { describe } = require('../describe');

const OPTIONS = ['contextManager', 'asyncTracking', 'attributes', 'resource', 'schema', 'tlsSchemaVersion', 'allocations'];
const SCHEMAS = ['tls', 'nodejs'];
// threadlocal.schema_version of schema 'tls': every reader seen so far keys on 'tlsdesc_v1_dev';
// OTEP 4947 renames it 'tls_v1', which readers are to accept beside it.
const TLS_SCHEMA_VERSIONS = ['tlsdesc_v1_dev', 'tls_v1'];
const MANAGER_METHODS = ['active', 'with', 'bind', 'enable', 'disable'];

/** Validates the options of the constructor and of register() (`allowed`: the keys they take). */
function checkOptions(options, allowed = OPTIONS) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`options: expected an object, got ${describe(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) throw new TypeError(`options.${key}: unknown option (expected ${allowed.join(', ')})`);
  }
  const { contextManager, asyncTracking, schema, tlsSchemaVersion } = options;
  if (schema !== undefined) {
    if (typeof schema !== 'string') throw new TypeError(`options.schema: expected 'tls' or 'nodejs', got ${describe(schema)}`);
    if (!SCHEMAS.includes(schema)) throw new RangeError(`options.schema: expected 'tls' or 'nodejs', got ${JSON.stringify(schema)}`);
    if (schema === 'nodejs' && contextManager !== undefined) {
      throw new TypeError("options.contextManager: not used with schema 'nodejs' (its contexts live in the " +
        "thread's AsyncLocalStorage, where readers find them); leave it out, or use schema 'tls'");
    }
  }
  if (tlsSchemaVersion !== undefined && !TLS_SCHEMA_VERSIONS.includes(tlsSchemaVersion)) {
    const expected = TLS_SCHEMA_VERSIONS.map((v) => `'${v}'`).join(' or ');
    if (typeof tlsSchemaVersion !== 'string') throw new TypeError(`options.tlsSchemaVersion: expected ${expected}, got ${describe(tlsSchemaVersion)}`);
    throw new RangeError(`options.tlsSchemaVersion: expected ${expected}, got ${JSON.stringify(tlsSchemaVersion)}`);
  }
  checkAllocations(options.allocations);
  if (asyncTracking !== undefined && typeof asyncTracking !== 'boolean') {
    throw new TypeError(`options.asyncTracking: expected a boolean, got ${describe(asyncTracking)}`);
  }
  if (contextManager !== undefined) {
    if (contextManager === null || typeof contextManager !== 'object') {
      throw new TypeError('options.contextManager: expected a ContextManager object ' +
        `(active, with, bind, enable, disable), got ${describe(contextManager)}`);
    }
    const missing = MANAGER_METHODS.filter((m) => typeof contextManager[m] !== 'function');
    if (missing.length > 0) {
      throw new TypeError(`options.contextManager: expected a ContextManager, missing method(s) ${missing.join(', ')}`);
    }
    if (contextManager instanceof ThreadContextManager) {
      throw new TypeError('options.contextManager: expected the manager to delegate to, got a ThreadContextManager');
    }
  }
}

class ThreadContextManager extends TlsContextManager {
  /**
   * @param {{ schema?: 'tls' | 'nodejs', tlsSchemaVersion?: 'tlsdesc_v1_dev' | 'tls_v1', contextManager?: ContextManager,
   *   asyncTracking?: boolean, attributes?: string[], resource?: Resource,
   *   allocations?: boolean | { samplingIntervalBytes?: number } }} [options]
   *   schema: how readers find the span: 'tls' (default) or 'nodejs', which returns a
   *     FrameContextManager where the runtime has AsyncContextFrame, else publishes with 'tls'
   *     after one warning (`schema` then says 'tls', `schemaFallback` why).
   *   tlsSchemaVersion: the threadlocal.schema_version announced while publishing with 'tls'
   *     (default 'tlsdesc_v1_dev', what readers key on today; 'tls_v1', OTEP 4947's new name).
   *   contextManager: where contexts are stored (default: a new AsyncLocalStorageContextManager).
   *   asyncTracking: false publishes only around with(): never a wrong span, none after an await.
   *   attributes: attribute keys whose values records carry, registered at enable().
   *   resource: the process context's resource (default: the SDK's, from its spans).
   *   allocations: V8's sampling heap profiler on each thread enabling it
   *   (js/profiling/allocations.js; default: OTEL_THREAD_CTX_ALLOCATIONS).
   */
  constructor(options = {}) {
    checkOptions(options);
    let schemaFallback = null;
    // A subclass of this one gets what it extends: the 'tls' manager.
    if (options.schema === 'nodejs' && new.target === ThreadContextManager) {
      const { frames, reason } = nodejsSchema();
      if (frames !== null) return new FrameContextManager(options, frames);
      schemaFallback = reason;
    }
    super(options);
    this._schemaFallback = schemaFallback;
  }

  // A FrameContextManager does not extend this class (that would make the two files import each
  // other), yet `manager instanceof ThreadContextManager` holds for every manager the constructor
  // returns, as the typings promise. Subclasses keep the ordinary check.
  static [Symbol.hasInstance](value) {
    if (this === ThreadContextManager) return value instanceof TlsContextManager;
    return Function.prototype[Symbol.hasInstance].call(this, value);
  }
}

module.exports = { ThreadContextManager, checkOptions };
