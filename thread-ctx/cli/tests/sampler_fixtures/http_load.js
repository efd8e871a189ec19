// Load for the leak/coverage test (not shipped): autocannon against URL with CONNECTIONS
// connections until SIGINT (or SECONDS at most). Prints "ready" once it stops cleanly on SIGINT,
// then its result as one JSON object.
// autocannon's own CLI dies on SIGINT without a result; its API stops cleanly.
// Usage: node http_load.js PACKAGE_DIR URL CONNECTIONS SECONDS
'use strict';
const path = require('node:path');
const [pkg, url, connections, seconds] = process.argv.slice(2);
const autocannon = require(path.join(pkg, 'node_modules', 'autocannon'));

const instance = autocannon({ url, connections: Number(connections), duration: Number(seconds) }, (err, result) => {
  if (err) throw err;
  process.stdout.write(`${JSON.stringify(result)}\n`);
});
process.once('SIGINT', () => instance.stop());
process.stdout.write('ready\n');
