// The 'report-worker' thread: its own SDK and otel-thread-ctx manager (each JS thread publishes
// its own record), a span per report in the trace of the request that asked for it.
import { context, propagation, trace } from '@opentelemetry/api';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { ThreadContextManager } from 'otel-thread-ctx';
import { parentPort, threadId } from 'node:worker_threads';
import { exportedSpansLog } from '../exported-spans';
import type { Job, Reply } from './report-job';

const sdk = new NodeSDK({
  serviceName: process.env.OTEL_SERVICE_NAME ?? 'nest-shop',
  contextManager: new ThreadContextManager({ attributes: ['http.route', 'http.request.method'] }),
  ...exportedSpansLog(),
});
sdk.start();
const tracer = trace.getTracer('nest-shop-reports');

// `ms` of synchronous CPU on this thread.
function renderReport(ms: number): number {
  const end = performance.now() + ms;
  let rows = 0;
  while (performance.now() < end) rows += JSON.stringify({ row: rows, total: rows * 1.07 }).length > 0 ? 1 : 0;
  return rows;
}

parentPort!.on('message', (job: Job) => {
  if (job.kind === 'shutdown') {
    sdk.shutdown().finally(() => parentPort!.postMessage({ id: 0, rows: 0, threadId }));
    return;
  }
  const parent = propagation.extract(context.active(), job.carrier);
  tracer.startActiveSpan('render report', {}, parent, (span) => {
    const rows = renderReport(job.ms);
    span.setAttribute('report.rows', rows);
    span.end();
    parentPort!.postMessage({ id: job.id, rows, threadId } satisfies Reply);
  });
});
