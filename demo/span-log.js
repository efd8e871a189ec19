'use strict';
// The demo service's span exporter: each finished span as one JSON line (trace id, span id,
// parent, name, route, start, duration), so that the demo can name the slowest trace and draw
// its flame graph from what the Collector received.
const fs = require('node:fs');

class JsonLinesSpanExporter {
  constructor(path) { this.fd = path ? fs.openSync(path, 'w') : null; }

  export(spans, done) {
    if (this.fd !== null) {
      const lines = spans.map((s) => JSON.stringify({
        traceId: s.spanContext().traceId,
        spanId: s.spanContext().spanId,
        parentSpanId: s.parentSpanContext?.spanId ?? s.parentSpanId ?? null,
        name: s.name,
        route: s.attributes['http.route'] ?? null,
        startMs: s.startTime[0] * 1e3 + s.startTime[1] / 1e6, // epoch
        durationMs: s.duration[0] * 1e3 + s.duration[1] / 1e6,
      })).join('\n') + '\n';
      fs.writeSync(this.fd, lines);
    }
    done({ code: 0 });
  }

  shutdown() {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
    return Promise.resolve();
  }
}

module.exports = { JsonLinesSpanExporter };
