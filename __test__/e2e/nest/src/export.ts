// The blocking route's work: the thread sleeps in the kernel inside this function, off CPU with
// the request's span active, the way synchronous code blocks a Node service.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export type BlockingCall = 'atomics' | 'fs' | 'exec';
export const BLOCKING_CALLS: readonly BlockingCall[] = ['atomics', 'fs', 'exec'];

const flag = new Int32Array(new SharedArrayBuffer(4));
const exportFile = path.join(os.tmpdir(), `nest-export-${process.pid}.csv`);
const rows = Buffer.alloc(1 << 20, 'sku,price\n');

/** Blocks the calling thread about `ms` milliseconds in `via`; returns the bytes written. */
export function writeExportSync(via: BlockingCall, ms: number): number {
  switch (via) {
    case 'atomics':
      Atomics.wait(flag, 0, 0, ms);
      return 0;
    case 'fs': {
      // Written and flushed to the disk: the thread waits for the device.
      const fd = fs.openSync(exportFile, 'w');
      try {
        fs.writeSync(fd, rows);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      return rows.length;
    }
    case 'exec':
      execFileSync('sleep', [String(ms / 1000)]);
      return 0;
  }
}
