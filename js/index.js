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
};
