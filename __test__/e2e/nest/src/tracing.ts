// The service's OpenTelemetry setup, as a user writes it: NodeSDK with auto-instrumentation, and
// otel-thread-ctx's context manager as its one extra line. main.ts imports it before anything
// else, so that the instrumentations patch http, express and Nest before they load. The SDK's
// exporter, endpoint and batching come from the standard OTEL_* environment variables.
import { NodeSDK } from '@opentelemetry/sdk-node';
import { getNodeAutoInstrumentations } from '@opentelemetry/auto-instrumentations-node';
import { ThreadContextManager } from 'otel-thread-ctx';
import { exportedSpansLog } from './exported-spans';

export const sdk = new NodeSDK({
  serviceName: process.env.OTEL_SERVICE_NAME ?? 'nest-shop',
  contextManager: new ThreadContextManager({ attributes: ['http.route', 'http.request.method'] }),
  instrumentations: [getNodeAutoInstrumentations()],
  ...exportedSpansLog(),
});
sdk.start();
