'use strict';
// The built .node must carry otel_thread_ctx_v1 the way OTEP 4947 readers look for it.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const { ADDON } = require('./helpers/addon');

const readelf = (...args) => execFileSync('readelf', [...args, ADDON], { encoding: 'utf8' });

test('otel_thread_ctx_v1 is in .dynsym as an 8-byte global default TLS symbol', () => {
  const line = readelf('--dyn-syms', '-W').split('\n').find((l) => / otel_thread_ctx_v1$/.test(l));
  assert.ok(line, 'otel_thread_ctx_v1 not found in .dynsym');
  // Num: Value Size Type Bind Vis Ndx Name
  const [, , size, type, bind, vis, ndx] = line.trim().split(/\s+/);
  assert.deepEqual({ size, type, bind, vis }, { size: '8', type: 'TLS', bind: 'GLOBAL', vis: 'DEFAULT' });
  assert.notEqual(ndx, 'UND', 'the symbol must be defined by the addon');
});

test('otel_thread_ctx_v1 is reached through an R_X86_64_TLSDESC relocation naming it', () => {
  const relocs = readelf('-rW').split('\n').filter((l) => /\botel_thread_ctx_v1\b/.test(l));
  assert.ok(relocs.length > 0, 'no relocation references otel_thread_ctx_v1');
  for (const r of relocs) assert.match(r, /R_X86_64_TLSDESC/, `unexpected relocation: ${r}`);
  assert.ok(!relocs.some((r) => /DTPMOD64|TPOFF64|DTPOFF64/.test(r)), 'must not mix access models');
});

test('the module TLS block is small enough for glibc static TLS', () => {
  const line = readelf('-lW').split('\n').find((l) => /^\s*TLS\s/.test(l));
  assert.ok(line, 'no PT_TLS segment');
  const memsz = parseInt(line.trim().split(/\s+/)[5], 16);
  console.log(`# PT_TLS MemSiz = ${memsz} bytes`);
  // glibc's optional static TLS surplus is 512 bytes by default; stay well below it.
  assert.ok(memsz <= 384, `PT_TLS MemSiz ${memsz} bytes leaves too little of glibc's 512-byte static surplus`);
});
