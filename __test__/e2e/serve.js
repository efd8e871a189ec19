'use strict';
// What every end-to-end service does around its handlers: listens on PORT (0: any) on loopback,
// prints {"pid":..,"port":..} for demo/pipeline.js's startService, and on SIGTERM or SIGINT
// closes and flushes its SDK's spans before it exits.

function serve(server, sdk) {
  server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
    console.log(JSON.stringify({ pid: process.pid, port: server.address().port }));
  });
  const stop = () => {
    server.close();
    sdk.shutdown().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

module.exports = { serve };
