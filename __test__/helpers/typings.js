'use strict';
// What index.d.ts declares: the names of its exported functions, classes and constants.
const fs = require('node:fs');

function declaredExports(dtsFile) {
  const dts = fs.readFileSync(dtsFile, 'utf8');
  const names = new Set();
  for (const m of dts.matchAll(/^export (?:declare )?(?:function|class|const) (\w+)/gm)) names.add(m[1]);
  return [...names].sort();
}

module.exports = { declaredExports };
