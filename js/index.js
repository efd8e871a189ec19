'use strict';
// The package's entry point, for require() and import alike.
const { layout } = require('./record/layout');
const record = require('./tls/record-api');
const processContext = require('./process-context/process-context');

// The record, directly (js/tls/record-api.js): no OpenTelemetry needed.
exports.setSpanContext = record.setSpanContext;
exports.clearSpanContext = record.clearSpanContext;
exports.getSpanContext = record.getSpanContext;
exports.threadInfo = record.threadInfo;
exports.recordView = record.recordView;
exports.layout = layout;
// OTEP 4719 process context and the attribute key map (js/process-context/): no OTel needed.
exports.publishProcessContext = processContext.publishProcessContext;
exports.processContextInfo = processContext.processContextInfo;
exports.registerAttributeKeys = (keys) => processContext.registerAttributeKeys(keys);
exports.attributeKeyMap = processContext.attributeKeyMap;
// JS frames an outside profiler can name (js/profiling/jit-names.js): what a running process
// can turn on.
const jitNames = require('./profiling/jit-names');
exports.enableJitNames = jitNames.enableJitNames;
exports.jitNamesStatus = jitNames.jitNamesStatus;

// The context manager layer (js/manager/, and the schemas' managers in js/tls/ and js/nodejs/)
// needs @opentelemetry/api, an optional peer dependency: it is loaded on first use, and where the
// peer cannot be loaded each of its exports is a stand-in that throws, when called, an error
// saying what to install. Importing the package never fails for want of it.
const PEERS = '@opentelemetry/api and @opentelemetry/context-async-hooks';
let managerLayer;

function unavailable(name, cause) {
  const peerMissing = cause && cause.code === 'MODULE_NOT_FOUND' && cause.message.includes('@opentelemetry/');
  const message = peerMissing
    ? `otel-thread-ctx: ${name} needs the peer dependencies ${PEERS}, and this service does not have ` +
      `them (${cause.message.split('\n')[0]}): npm install ${PEERS.replace(' and ', ' ')}`
    : `otel-thread-ctx: ${name} is unavailable: its context manager layer failed to load: ${cause && cause.message}`;
  const err = new Error(message, { cause });
  err.code = peerMissing ? 'OTEL_THREAD_CTX_PEER_MISSING' : 'OTEL_THREAD_CTX_LAYER_FAILED';
  return err;
}

function standIns(cause) {
  const throwing = (name) => ({
    [name]() { throw unavailable(`${name}()`, cause); },
  })[name];
  return {
    // A class, so that `new ThreadContextManager()` and `extends` throw the same clear error.
    ThreadContextManager: class ThreadContextManager {
      constructor() { throw unavailable('new ThreadContextManager()', cause); }
    },
    ThreadSpanProcessor: class ThreadSpanProcessor {
      constructor() { throw unavailable('new ThreadSpanProcessor()', cause); }
    },
    register: throwing('register'),
    traceActive: throwing('traceActive'),
    setAttribute: throwing('setAttribute'),
    droppedAttributeCount: throwing('droppedAttributeCount'),
    getFrameSpanContext: throwing('getFrameSpanContext'),
    nodejsSchemaInfo: throwing('nodejsSchemaInfo'),
  };
}

function layer() {
  if (managerLayer === undefined) {
    try {
      const { setAttribute, droppedAttributeCount } = require('./manager/set-attribute');
      // Schema 'nodejs' (js/nodejs/): what its readers see on this thread, from the frame.
      const { getFrameSpanContext, nodejsSchemaInfo } = require('./nodejs/frame-span-context');
      managerLayer = {
        ThreadContextManager: require('./manager/thread-context-manager').ThreadContextManager,
        ThreadSpanProcessor: require('./manager/thread-span-processor').ThreadSpanProcessor,
        register: require('./manager/register').register,
        traceActive: require('./manager/trace-active').traceActive,
        setAttribute,
        droppedAttributeCount,
        getFrameSpanContext,
        nodejsSchemaInfo,
      };
    } catch (err) {
      managerLayer = standIns(err);
    }
  }
  return managerLayer;
}

const LAYER_EXPORTS = ['ThreadContextManager', 'ThreadSpanProcessor', 'register', 'traceActive', 'setAttribute', 'droppedAttributeCount',
  'getFrameSpanContext', 'nodejsSchemaInfo'];
for (const name of LAYER_EXPORTS) {
  Object.defineProperty(exports, name, { enumerable: true, get: () => layer()[name] });
}

// Node's ES-module loader learns a CommonJS module's export names by scanning its source
// (cjs-module-lexer), which cannot see names defined by the getters above. This statement never
// runs; it only lists them, in the form esbuild emits for the same purpose, so that
// `import { ThreadContextManager } from 'otel-thread-ctx'` works. The loader then reads each name
// once at import: that loads the layer (or its stand-ins), never throws.
0 && (module.exports = { ThreadContextManager, ThreadSpanProcessor, register, traceActive, setAttribute, droppedAttributeCount, getFrameSpanContext, nodejsSchemaInfo });
