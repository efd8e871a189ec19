// Reports are rendered off the event loop, in one worker thread named 'report-worker': the
// request's trace context goes with each job, so the worker's span joins the request's trace.
import { Injectable, type OnModuleDestroy } from '@nestjs/common';
import { context, propagation } from '@opentelemetry/api';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Job, Reply } from './report-job';

@Injectable()
export class ReportService implements OnModuleDestroy {
  private readonly worker = new Worker(path.join(__dirname, 'report-worker.js'), { name: 'report-worker' });
  private readonly waiting = new Map<number, (reply: Reply) => void>();
  private nextId = 1;

  constructor() {
    this.worker.on('message', (reply: Reply) => {
      this.waiting.get(reply.id)?.(reply);
      this.waiting.delete(reply.id);
    });
  }

  render(ms: number): Promise<Reply> {
    const carrier: Record<string, string> = {};
    propagation.inject(context.active(), carrier);
    const job: Job = { kind: 'render', id: this.nextId++, ms, carrier };
    return new Promise((resolve) => {
      this.waiting.set(job.id, resolve);
      this.worker.postMessage(job);
    });
  }

  // The worker flushes its spans before it goes.
  async onModuleDestroy(): Promise<void> {
    const flushed = new Promise<void>((resolve) => this.worker.once('message', () => resolve()));
    this.worker.postMessage({ kind: 'shutdown' } satisfies Job);
    await Promise.race([flushed, new Promise((resolve) => setTimeout(resolve, 5000))]);
    await this.worker.terminate();
  }
}
