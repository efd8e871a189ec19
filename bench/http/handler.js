'use strict';
// The request handler of the benchmark service, the same in every mode: parse the URL, three
// awaits on the data store (the second inside a child span), a ~1 KB JSON response.
// `inChildSpan(name, fn)` runs fn in a child span (OpenTelemetry modes) or just runs it.

const store = require('./data-store');

function createHandler(inChildSpan) {
  return async function handle(req, res) {
    const url = new URL(req.url, 'http://127.0.0.1');
    const id = Number(url.searchParams.get('id') ?? 1);
    const user = await store.getUser(id);
    const orders = await inChildSpan('orders.query', () => store.getOrders(id));
    const preferences = await store.getPreferences(id);
    const body = JSON.stringify({
      path: url.pathname, user, orders, preferences, count: orders.length,
    });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
}

module.exports = { createHandler };
