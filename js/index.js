'use strict';
const native = require('./native');
const layout = require('./layout');
const processContext = require('./process-context');

module.exports = {
  setSpanContext: native.setSpanContext,
  clearSpanContext: native.clearSpanContext,
  getSpanContext: native.getSpanContext,
  threadInfo: () => ({ supported: native.supported, ...native.threadInfo() }),
  recordView: native.recordView,
  layout,
  // OTEP 4719 process context and the attribute key map (js/process-context.js): no OTel needed.
  publishProcessContext: processContext.publishProcessContext,
  processContextInfo: processContext.processContextInfo,
  registerAttributeKeys: processContext.registerAttributeKeys,
  attributeKeyMap: processContext.attributeKeyMap,
  // Context manager layer (js/context-manager.js, register.js, trace-active.js): loaded on first
  // use, since it needs the @opentelemetry/api peer dependency.
  get ThreadContextManager() { return require('./context-manager').ThreadContextManager; },
  get register() { return require('./register').register; },
  get traceActive() { return require('./trace-active').traceActive; },
  get setAttribute() { return require('./span-attributes').setAttribute; },
  get droppedAttributeCount() { return require('./span-attributes').droppedAttributeCount; },
};
