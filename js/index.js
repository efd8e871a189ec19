'use strict';
const native = require('./native');
const layout = require('./layout');

module.exports = {
  setSpanContext: native.setSpanContext,
  clearSpanContext: native.clearSpanContext,
  getSpanContext: native.getSpanContext,
  threadInfo: () => ({ supported: native.supported, ...native.threadInfo() }),
  recordView: native.recordView,
  layout,
  // Context manager layer (js/context-manager.js, register.js, trace-active.js): loaded on first
  // use, since it needs the @opentelemetry/api peer dependency.
  get ThreadContextManager() { return require('./context-manager').ThreadContextManager; },
  get register() { return require('./register').register; },
  get traceActive() { return require('./trace-active').traceActive; },
};
