'use strict';
// Loads the V8 part of the `nodejs` schema (v8-addon/): one prebuilt file per Node ABI
// (process.versions.modules), in napi-rs's order: the local build (prebuilds/v8-addon/, made by
// scripts/build-v8-addon.sh in a checkout), then the platform package's v8-addon/ (the release
// tarball). Never throws: `{ addon, reason }`, the reason saying why there is none.

const path = require('node:path');
const { prebuilt, PACKAGE_ROOT } = require('../native/platform');

const ABI = process.versions.modules;
const FILE = `node-abi${ABI}.node`;

function candidates(p) {
  const list = [path.join(PACKAGE_ROOT, 'prebuilds', 'v8-addon', FILE)];
  try {
    list.push(path.join(p.platformPackageDir(), 'v8-addon', FILE));
  } catch {
    // no platform package installed (a checkout): the local build only
  }
  return list;
}

function load() {
  const p = prebuilt();
  if (!p.supported) return { addon: null, reason: p.reason };
  const errors = [];
  for (const file of candidates(p)) {
    try {
      return { addon: require(file), reason: null };
    } catch (error) {
      if (error.code !== 'MODULE_NOT_FOUND') errors.push(`${file}: ${error.message}`);
    }
  }
  return {
    addon: null,
    reason: errors.length > 0
      ? `its V8 part does not load (${errors.join('; ')})`
      : `no V8 part is built for this Node's ABI ${ABI} (Node ${process.versions.node}; built for Node 22, 24 and 26)`,
  };
}

let loaded = null;

/** The V8 addon of this thread (each worker loads its own instance), or null and why. */
function v8Addon() {
  if (loaded === null) loaded = load();
  return loaded;
}

module.exports = { v8Addon, V8_ADDON_FILE: FILE };
