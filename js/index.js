'use strict';
const { layout } = require('./layout');
const record = require('./record-api');
const processContext = require('./process-context');

module.exports = {
  // The record, directly (js/record-api.js): no OpenTelemetry needed.
  setSpanContext: record.setSpanContext,
  clearSpanContext: record.clearSpanContext,
  getSpanContext: record.getSpanContext,
  threadInfo: record.threadInfo,
  recordView: record.recordView,
  layout,
  // OTEP 4719 process context and the attribute key map (js/process-context.js): no OTel needed.
  publishProcessContext: processContext.publishProcessContext,
  processContextInfo: processContext.processContextInfo,
  registerAttributeKeys: (keys) => processContext.registerAttributeKeys(keys),
  attributeKeyMap: processContext.attributeKeyMap,
  // Context manager layer (js/context-manager.js, register.js, trace-active.js, set-attribute.js):
  // loaded on first use, since it needs the @opentelemetry/api peer dependency.
  get ThreadContextManager() { return require('./context-manager').ThreadContextManager; },
  get register() { return require('./register').register; },
  get traceActive() { return require('./trace-active').traceActive; },
  get setAttribute() { return require('./set-attribute').setAttribute; },
  get droppedAttributeCount() { return require('./set-attribute').droppedAttributeCount; },
  // JS frames an outside profiler can name (js/jit-names.js): what a running process can turn on.
  get enableJitNames() { return require('./jit-names').enableJitNames; },
  get jitNamesStatus() { return require('./jit-names').jitNamesStatus; },
};
