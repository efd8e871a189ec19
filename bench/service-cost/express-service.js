'use strict';
// The plain web service: Express 5 traced by tracing.js (auto-instrumentation: the http server
// span and Express's middleware and handler spans), one JSON route that does a little work
// (a query string parsed, 50 items built and serialised).
//   SERVICE_CONTEXT=thread|stock PORT=0 node bench/service-cost/express-service.js
const { serve } = require('./tracing');
// Required after the SDK started, so that the instrumentations patch them.
const http = require('node:http');
const express = require('express');

const app = express();
app.use(express.json());
app.get('/api/items/:category', (req, res) => {
  const limit = Math.min(Number(req.query.limit) || 50, 200);
  const items = Array.from({ length: limit }, (_, i) => ({ id: i, category: req.params.category, name: `item ${i}`, price: (i * 7) % 100 }));
  res.json({ count: items.length, items });
});

serve(http.createServer(app));
