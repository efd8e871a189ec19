'use strict';
// A client of the end-to-end tests' service: requests to `route`, back to back on one kept-alive
// connection, while `going()`, `pause` ms between two; resolves with how many it made.
const http = require('node:http');
const { setTimeout: sleep } = require('node:timers/promises');

async function client(port, route, going, pause = 0) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let n = 0;
  while (going()) {
    await new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port, path: route, agent }, (res) => res.resume().on('end', resolve)).on('error', reject);
    });
    n++;
    if (pause > 0) await sleep(pause);
  }
  agent.destroy();
  return n;
}

module.exports = { client };
