'use strict';
// ThreadSpanProcessor: an SDK span processor that writes `thread.id` and `thread.name` on every
// span when it starts, for the spans the context manager never sees. The manager writes them at a
// span's first activation; a span no one activates has none: fetch's (undici's instrumentation
// starts its client span and injects its context into the request's headers, never making it
// active), and any span a library starts and ends without context.with(). A span starts on the
// thread that calls startSpan, so onStart writes that thread's. Spans that have them keep theirs.
//   new NodeSDK({ contextManager: new ThreadContextManager(),
//     spanProcessors: [new ThreadSpanProcessor(), new BatchSpanProcessor(new OTLPTraceExporter())] })

const { noteSpanThread } = require('../native/thread-identity');

class ThreadSpanProcessor {
  onStart(span) {
    noteSpanThread(span);
  }

  onEnd() {}

  forceFlush() {
    return Promise.resolve();
  }

  shutdown() {
    return Promise.resolve();
  }
}

module.exports = { ThreadSpanProcessor };
