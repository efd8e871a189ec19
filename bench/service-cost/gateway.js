'use strict';
// The async-heavy service: an Apollo Server GraphQL gateway (its standalone node:http server)
// whose resolvers fetch from downstream.js (DOWNSTREAM_URL) over fetch. Traced by tracing.js
// (auto-instrumentation: http, graphql with a span per resolved field, undici for fetch), a
// `product` query is 16 spans: the server span, the operation, 10 field resolvers and 4
// fetches (parse and validate only the first time: Apollo caches the parsed document).
//   SERVICE_CONTEXT=thread|stock DOWNSTREAM_URL=http://127.0.0.1:N PORT=0 node bench/service-cost/gateway.js
require('./tracing');
// Required after the SDK started, so that the instrumentations patch them.
const { ApolloServer } = require('@apollo/server');
const { startStandaloneServer } = require('@apollo/server/standalone');

const downstream = process.env.DOWNSTREAM_URL;
if (!/^http:\/\//.test(downstream || '')) throw new TypeError(`DOWNSTREAM_URL: expected an http:// URL, got ${JSON.stringify(downstream)}`);

async function getJSON(kind, sku) {
  const res = await fetch(`${downstream}/${kind}/${encodeURIComponent(sku)}`);
  if (!res.ok) throw new Error(`downstream answered ${res.status} for ${kind}`);
  return res.json();
}

const typeDefs = `
  type Review { author: String!, rating: Int! }
  type Product { sku: String!, name: String!, stock: Int!, price: Float!, reviews: [Review!]! }
  type Query { product(sku: String!): Product }
`;
const resolvers = {
  Query: { product: (_, { sku }) => getJSON('product', sku) },
  Product: {
    stock: async ({ sku }) => (await getJSON('stock', sku)).stock,
    price: async ({ sku }) => (await getJSON('price', sku)).price,
    reviews: async ({ sku }) => (await getJSON('reviews', sku)).reviews,
  },
};

(async () => {
  const apollo = new ApolloServer({ typeDefs, resolvers });
  // startStandaloneServer listens itself: PORT 0 then the port it got, printed as serve() does.
  const { url } = await startStandaloneServer(apollo, { listen: { port: Number(process.env.PORT || 0), host: '127.0.0.1' } });
  console.log(JSON.stringify({ pid: process.pid, port: Number(new URL(url).port) }));
  process.on('SIGTERM', () => process.exit(0));
})();
