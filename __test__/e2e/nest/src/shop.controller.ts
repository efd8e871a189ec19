// The routes. Nest 12 sets no `http.route` on the server span; the paths carry ids on purpose.
//   GET /price/:sku?ms=5     computePrice: `ms` of synchronous CPU on the event loop
//   GET /quote/:sku          awaits a 10 ms timer, then prices the sku (1 ms of CPU)
//   GET /orders/:id          answers at once (the cheap route of the load tests)
//   GET /report?ms=20        renders a report in the 'report-worker' worker thread (`ms` of CPU there)
//   GET /export?via=atomics&ms=20  writeExportSync: blocks the event loop, off CPU, in
//                            Atomics.wait, fs.fsyncSync of 1 MiB ('fs') or execFileSync ('exec')
import { BadRequestException, Controller, Get, Param, Query } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { computePrice } from './compute-price';
import { BLOCKING_CALLS, type BlockingCall, writeExportSync } from './export';
import { ReportService } from './report/report.service';

function millis(value: string | undefined, fallback: number): number {
  const ms = value === undefined ? fallback : Number(value);
  if (!Number.isFinite(ms) || ms < 0 || ms > 10_000) throw new BadRequestException(`ms is "${value}": expected 0 to 10000`);
  return ms;
}

@Controller()
export class ShopController {
  constructor(private readonly reports: ReportService) {}

  @Get('price/:sku')
  price(@Param('sku') sku: string, @Query('ms') ms?: string) {
    return { sku, price: computePrice(sku, millis(ms, 5)) };
  }

  @Get('quote/:sku')
  async quote(@Param('sku') sku: string) {
    await sleep(10);
    return { sku, quote: computePrice(sku, 1) };
  }

  @Get('orders/:id')
  order(@Param('id') id: string) {
    return { id, status: 'shipped' };
  }

  @Get('report')
  report(@Query('ms') ms?: string) {
    return this.reports.render(millis(ms, 20));
  }

  @Get('export')
  export(@Query('via') via = 'atomics', @Query('ms') ms?: string) {
    if (!BLOCKING_CALLS.includes(via as BlockingCall)) throw new BadRequestException(`via is "${via}": expected one of ${BLOCKING_CALLS.join(', ')}`);
    return { via, bytes: writeExportSync(via as BlockingCall, millis(ms, 20)) };
  }
}
