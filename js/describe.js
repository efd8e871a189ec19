'use strict';
// How a wrong argument is named in error messages, which all take one form:
// "<argument>: expected <what>, got <describe(value)>".

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `string ${JSON.stringify(value)}`;
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'function') return 'a function';
  return `${typeof value} ${String(value)}`;
}

module.exports = { describe };
