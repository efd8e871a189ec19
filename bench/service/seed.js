'use strict';
// The service benchmark's data: customers, products and orders with items, generated
// deterministically (the same rows in every run), as SQL for psql.

const CUSTOMERS = 2000;
const PRODUCTS = 500;
const ORDERS = 20000;
const CATEGORIES = ['books', 'garden', 'kitchen', 'music', 'outdoor', 'toys', 'tools', 'video'];

// A small deterministic generator (LCG) so every run seeds the same data.
function generator(seed) {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 4294967296;
  };
}

function seedSql() {
  const random = generator(42);
  const lines = [
    'CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text NOT NULL, region text NOT NULL, created_at timestamptz NOT NULL);',
    'CREATE TABLE products (id int PRIMARY KEY, sku text NOT NULL, title text NOT NULL, category text NOT NULL, price_cents int NOT NULL);',
    'CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers, status text NOT NULL, created_at timestamptz NOT NULL);',
    'CREATE TABLE order_items (order_id int NOT NULL REFERENCES orders, product_id int NOT NULL REFERENCES products, quantity int NOT NULL, price_cents int NOT NULL);',
  ];
  const regions = ['eu-west', 'eu-central', 'us-east', 'us-west', 'ap-south'];
  lines.push('COPY customers FROM stdin;');
  for (let i = 1; i <= CUSTOMERS; i++) {
    lines.push(`${i}\tCustomer ${i}\tcustomer${i}@example.test\t${regions[i % regions.length]}\t2024-01-01T00:00:00Z`);
  }
  lines.push('\\.');
  lines.push('COPY products FROM stdin;');
  for (let i = 1; i <= PRODUCTS; i++) {
    lines.push(`${i}\tSKU-${String(i).padStart(5, '0')}\tProduct number ${i}\t${CATEGORIES[i % CATEGORIES.length]}\t${199 + Math.floor(random() * 9800)}`);
  }
  lines.push('\\.');
  lines.push('COPY orders FROM stdin;');
  for (let i = 1; i <= ORDERS; i++) {
    const customer = 1 + Math.floor(random() * CUSTOMERS);
    lines.push(`${i}\t${customer}\t${random() < 0.7 ? 'shipped' : 'processing'}\t2025-0${1 + (i % 9)}-1${i % 10}T12:00:00Z`);
  }
  lines.push('\\.');
  lines.push('COPY order_items FROM stdin;');
  for (let i = 1; i <= ORDERS; i++) {
    const items = 1 + Math.floor(random() * 4);
    for (let k = 0; k < items; k++) {
      const product = 1 + Math.floor(random() * PRODUCTS);
      lines.push(`${i}\t${product}\t${1 + Math.floor(random() * 3)}\t${199 + Math.floor(random() * 9800)}`);
    }
  }
  lines.push('\\.');
  lines.push('CREATE INDEX ON orders (customer_id);', 'CREATE INDEX ON order_items (order_id);', 'CREATE INDEX ON products (category);');
  lines.push('ANALYZE;');
  return lines.join('\n') + '\n';
}

module.exports = { seedSql, CUSTOMERS, CATEGORIES };
