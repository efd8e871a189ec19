'use strict';
// The gateway's backend: plain node:http, no OpenTelemetry (its CPU is not measured), answering
// the gateway's fetches with small JSON documents at once.
//   PORT=0 node bench/service-cost/downstream.js   -> prints {"pid":..,"port":..}
const http = require('node:http');

const answers = {
  product: (sku) => ({ sku, name: `Product ${sku}` }),
  stock: (sku) => ({ sku, stock: 7 }),
  price: (sku) => ({ sku, price: 9.5 }),
  reviews: (sku) => ({ sku, reviews: [{ author: 'ada', rating: 5 }, { author: 'bob', rating: 4 }] }),
};

const server = http.createServer((req, res) => {
  const [, kind, sku] = req.url.split('/');
  const answer = answers[kind];
  if (!answer) return res.writeHead(404).end();
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer(decodeURIComponent(sku))));
});
server.keepAliveTimeout = 60000;
server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
  console.log(JSON.stringify({ pid: process.pid, port: server.address().port }));
});
