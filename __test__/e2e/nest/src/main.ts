// The NestJS service of the end-to-end tests (the routes: shop.controller.ts). It listens on
// 127.0.0.1:$PORT (0: a free port) and prints {"pid":..,"port":..} as its first line of output.
// SIGTERM or SIGINT closes it and flushes its spans.
import { sdk } from './tracing';
import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';

async function bootstrap(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
  await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  console.log(JSON.stringify({ pid: process.pid, port }));
  const stop = async (): Promise<void> => {
    await app.close();
    await sdk.shutdown();
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

bootstrap().catch((err) => {
  console.error(err);
  process.exit(1);
});
