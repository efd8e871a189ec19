// Test hook, not part of the wiring a user copies: with NEST_EXPORTED_SPANS naming a file, spans
// leave through the OTLP exporter the environment configures, and the ids of every span whose
// export the Collector acknowledged are appended to that file, one "traceId spanId startMs" line
// each (the start in wall-clock milliseconds, by which a test asks the backend for it).
// That is the list a test holds the backend to ("every span the SDK exported is in Jaeger").
import * as fs from 'node:fs';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base';

class LoggingExporter implements SpanExporter {
  constructor(private readonly inner: SpanExporter, private readonly file: string) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) {
        // One write per batch: lines from the main thread and the worker never interleave.
        fs.appendFileSync(this.file, spans.map((s) => `${s.spanContext().traceId} ${s.spanContext().spanId} ${s.startTime[0] * 1000 + Math.floor(s.startTime[1] / 1e6)}\n`).join(''));
      }
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/** NodeSDK options that log acknowledged spans, when NEST_EXPORTED_SPANS asks for it. */
export function exportedSpansLog(): { spanProcessors?: SpanProcessor[] } {
  const file = process.env.NEST_EXPORTED_SPANS;
  if (!file) return {};
  return { spanProcessors: [new BatchSpanProcessor(new LoggingExporter(new OTLPTraceExporter(), file))] };
}
