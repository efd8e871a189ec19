'use strict';
// The shop service's routes (Express): each queries PostgreSQL, transforms the rows in
// JavaScript (grouping, totals, currency formatting, sorting) and returns JSON.
//   GET /api/customers/:id          a customer with their orders and items (2 queries)
//   GET /api/products?category=C    a category's products with sales figures (1 query)
//   GET /api/orders/recent?limit=N  the latest orders with their customers (1 query)

const express = require('express');

const money = new Intl.NumberFormat('en-GB', { style: 'currency', currency: 'EUR' });

function orderSummaries(rows) {
  const orders = new Map();
  for (const row of rows) {
    let order = orders.get(row.order_id);
    if (order === undefined) {
      order = { id: row.order_id, status: row.status, createdAt: row.created_at.toISOString(), items: [], totalCents: 0 };
      orders.set(row.order_id, order);
    }
    const lineCents = row.quantity * row.price_cents;
    order.items.push({ sku: row.sku, title: row.title, quantity: row.quantity, price: money.format(row.price_cents / 100), line: money.format(lineCents / 100) });
    order.totalCents += lineCents;
  }
  return [...orders.values()]
    .sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1))
    .map((o) => ({ ...o, total: money.format(o.totalCents / 100) }));
}

function createApp(pool) {
  const app = express();
  app.disable('etag');
  app.disable('x-powered-by');

  app.get('/api/customers/:id', async (req, res) => {
    const id = Number(req.params.id);
    if (!Number.isInteger(id) || id <= 0) return res.status(400).json({ error: 'id: expected a positive integer' });
    const customer = await pool.query('SELECT id, name, email, region, created_at FROM customers WHERE id = $1', [id]);
    if (customer.rows.length === 0) return res.status(404).json({ error: 'no such customer' });
    const items = await pool.query(
      `SELECT o.id AS order_id, o.status, o.created_at, i.quantity, i.price_cents, p.sku, p.title
         FROM orders o JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id
        WHERE o.customer_id = $1 ORDER BY o.id`, [id]);
    const orders = orderSummaries(items.rows);
    const spentCents = orders.reduce((sum, o) => sum + o.totalCents, 0);
    res.json({ customer: customer.rows[0], orders, orderCount: orders.length, spent: money.format(spentCents / 100) });
  });

  app.get('/api/products', async (req, res) => {
    const category = String(req.query.category ?? 'books');
    const { rows } = await pool.query(
      'SELECT id, sku, title, price_cents FROM products WHERE category = $1 ORDER BY id', [category]);
    const prices = rows.map((r) => r.price_cents).sort((a, b) => a - b);
    const median = prices.length === 0 ? 0 : prices[prices.length >> 1];
    const products = rows.map((r) => ({
      id: r.id, sku: r.sku, title: r.title.toUpperCase(), price: money.format(r.price_cents / 100),
      band: r.price_cents < median ? 'below median' : 'median or above',
    })).sort((a, b) => (a.title < b.title ? -1 : a.title > b.title ? 1 : 0));
    res.json({ category, count: products.length, median: money.format(median / 100), products: products.slice(0, 40) });
  });

  app.get('/api/orders/recent', async (req, res) => {
    const limit = Math.min(100, Math.max(1, Number(req.query.limit ?? 30)));
    const { rows } = await pool.query(
      `SELECT o.id, o.status, o.created_at, c.name, c.region
         FROM orders o JOIN customers c ON c.id = o.customer_id ORDER BY o.id DESC LIMIT $1`, [limit]);
    const byRegion = {};
    for (const r of rows) (byRegion[r.region] ??= []).push({ id: r.id, status: r.status, customer: r.name, at: r.created_at.toISOString() });
    res.json({ limit, regions: Object.keys(byRegion).sort(), byRegion });
  });

  return app;
}

// The paths the load generator cycles through (a fixed mix, the same in every mode).
function loadPaths({ customers, categories }) {
  const paths = [];
  for (let i = 0; i < 12; i++) paths.push(`/api/customers/${1 + ((i * 7919) % customers)}`);
  for (const c of categories.slice(0, 4)) paths.push(`/api/products?category=${c}`);
  paths.push('/api/orders/recent?limit=30', '/api/orders/recent?limit=60');
  return paths;
}

module.exports = { createApp, loadPaths };
