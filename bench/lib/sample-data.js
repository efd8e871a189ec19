'use strict';
// The records the benchmark services serialise (~1 KB of JSON per response together), frozen so
// every mode serialises the same bytes.

const USER = Object.freeze({
  id: 0, name: 'Ada Lovelace', email: 'ada@example.test', plan: 'team', region: 'eu-west',
  createdAt: '2024-03-01T12:00:00.000Z', tags: ['admin', 'beta', 'billing'],
  address: Object.freeze({ street: '12 St James Square', city: 'London', postcode: 'SW1Y 4JH', country: 'GB' }),
});
const ORDERS = Object.freeze(Array.from({ length: 6 }, (_, i) => Object.freeze({
  id: `ord-${1000 + i}`, sku: `SKU-${(i * 7919) % 10000}`, quantity: 1 + (i % 3),
  priceCents: 1299 + i * 250, status: i % 2 === 0 ? 'shipped' : 'processing',
})));
const PREFERENCES = Object.freeze({
  locale: 'en-GB', timezone: 'Europe/London', newsletter: true, theme: 'dark',
  notifications: Object.freeze({ email: true, sms: false, push: true }),
});

module.exports = { USER, ORDERS, PREFERENCES };
