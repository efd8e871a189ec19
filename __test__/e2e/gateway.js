'use strict';
// The cross-service end-to-end test's GraphQL gateway (graphql-path.test.js): graphql-http on
// node:http (every operation is `POST /graphql`; no framework gives its server span an
// http.route), NodeSDK with the GraphQL and undici (fetch) instrumentations, otel-thread-ctx's
// context manager and its span processor (thread.id on fetch's client spans). `product` fetches the stock and the price from inventory.js (INVENTORY_URL).
//   PORT=0 INVENTORY_URL=http://127.0.0.1:N node __test__/e2e/gateway.js   -> prints {"pid":..,"port":..}
const { NodeSDK } = require('@opentelemetry/sdk-node');
const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-proto');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { UndiciInstrumentation } = require('@opentelemetry/instrumentation-undici');
const { GraphQLInstrumentation } = require('@opentelemetry/instrumentation-graphql');
const { serve } = require('./serve');
const { ThreadContextManager, ThreadSpanProcessor } = require('../..');

const sdk = new NodeSDK({
  serviceName: process.env.OTEL_SERVICE_NAME || 'gateway',
  contextManager: new ThreadContextManager(),
  // fetch's client spans are never made active: the processor gives them their thread.id.
  spanProcessors: [new ThreadSpanProcessor(), new BatchSpanProcessor(new OTLPTraceExporter())],
  // mergeItems: one resolver span per list field, not one per index (docs/spanprofiles.md).
  instrumentations: [new HttpInstrumentation(), new UndiciInstrumentation(), new GraphQLInstrumentation({ mergeItems: true, ignoreTrivialResolveSpans: true })],
});
sdk.start();
// Required after sdk.start() so that the instrumentations can patch them.
const http = require('node:http');
const { buildSchema } = require('graphql');
const { createHandler } = require('graphql-http/lib/use/http');

const inventory = process.env.INVENTORY_URL;
const schema = buildSchema(`
  type Product { sku: String!, stock: Int!, price: Float! }
  type Query { product(sku: String!): Product, health: String! }
`);

async function getJSON(path) {
  const res = await fetch(`${inventory}${path}`);
  if (!res.ok) throw new Error(`inventory answered ${res.status} for ${path}`);
  return res.json();
}

const rootValue = {
  product: async ({ sku }) => {
    const { stock } = await getJSON(`/stock/${encodeURIComponent(sku)}`);
    const { price } = await getJSON(`/price/${encodeURIComponent(sku)}`);
    return { sku, stock, price };
  },
  health: () => 'ok',
};

const handler = createHandler({ schema, rootValue });
const server = http.createServer((req, res) => {
  if (req.url.startsWith('/graphql')) return handler(req, res);
  res.writeHead(404).end();
});
serve(server, sdk);
