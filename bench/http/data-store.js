'use strict';
// A simulated data store: three lookups that resume through the three kinds of async switch a
// real driver produces (an I/O-like immediate, an already-resolved promise, a timer), returning
// fixed records so every mode serialises the same bytes.

const { USER, ORDERS, PREFERENCES } = require('../lib/sample-data');

function getUser(id) {
  return new Promise((resolve) => setImmediate(resolve, { ...USER, id }));
}

function getOrders() {
  return Promise.resolve(ORDERS);
}

function getPreferences() {
  return new Promise((resolve) => setTimeout(resolve, 0, PREFERENCES));
}

module.exports = { getUser, getOrders, getPreferences };
