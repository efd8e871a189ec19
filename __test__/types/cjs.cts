// The package as CommonJS requires it (see exercise.ts).
import threadCtx = require('otel-thread-ctx');
import { exercise } from './exercise.js';

exercise(threadCtx).catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
