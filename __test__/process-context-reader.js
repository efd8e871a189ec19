'use strict';
// An independent out-of-process reader of the OTEP 4719 process context, for the tests: finds the
// OTEL_CTX mapping in /proc/PID/maps, reads header and payload through /proc/PID/mem with the
// published-at re-check, and decodes payloads with protoc (Debian protobuf-compiler) against the
// OTLP schema written here, not with the addon's code.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const PROTO = `syntax = "proto3";
package otelctx;
message AnyValue {
  oneof value {
    string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4;
    ArrayValue array_value = 5; KeyValueList kvlist_value = 6; bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
message ProcessContext { Resource resource = 1; repeated KeyValue attributes = 2; }
message Batch { repeated ProcessContext items = 1; }
`;

const hasProtoc = (() => { try { execFileSync('protoc', ['--version']); return true; } catch { return false; } })();

let protoDir = null;
function protoFile() {
  if (protoDir === null) {
    protoDir = fs.mkdtempSync(path.join(os.tmpdir(), 'otel-ctx-proto-'));
    fs.writeFileSync(path.join(protoDir, 'process_context.proto'), PROTO);
  }
  return protoDir;
}

/** The OTEL_CTX mapping's start address and maps line, or null. */
function findMapping(pid) {
  const maps = fs.readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n');
  const line = maps.find((l) => /\s(\/memfd:OTEL_CTX( \(deleted\))?|\[anon_shmem:OTEL_CTX\]|\[anon:OTEL_CTX\])$/.test(l));
  if (line === undefined) return null;
  return { start: parseInt(line.split('-')[0], 16), line };
}

function readAt(fd, address, length) {
  const buf = Buffer.alloc(length);
  const n = fs.readSync(fd, buf, 0, length, address);
  if (n !== length) throw new Error(`short read at 0x${address.toString(16)}: ${n} of ${length} bytes`);
  return buf;
}

function parseHeader(buf) {
  return {
    signature: buf.subarray(0, 8).toString('latin1'),
    version: buf.readUInt32LE(8),
    payloadSize: buf.readUInt32LE(12),
    publishedAt: buf.readBigUInt64LE(16),
    payloadAddress: Number(buf.readBigUInt64LE(24)),
  };
}

/**
 * One consistent read: header, payload, header again; null when the writer was mid-update
 * (published-at 0 or changed), so the caller retries.
 */
function readOnce(fd, start) {
  const header = parseHeader(readAt(fd, start, 32));
  if (header.signature !== 'OTEL_CTX' || header.publishedAt === 0n) return { header, payload: null };
  let payload;
  try {
    payload = readAt(fd, header.payloadAddress, header.payloadSize);
  } catch {
    return { header, payload: null }; // freed under us: the re-check below would fail anyway
  }
  const again = parseHeader(readAt(fd, start, 32));
  if (again.publishedAt !== header.publishedAt) return { header, payload: null };
  return { header, payload };
}

/** Reads the process context of `pid` (retrying a racing update a few times). */
function readProcessContext(pid) {
  const mapping = findMapping(pid);
  if (mapping === null) throw new Error(`no OTEL_CTX mapping in /proc/${pid}/maps`);
  const fd = fs.openSync(`/proc/${pid}/mem`, 'r');
  try {
    for (let i = 0; i < 100; i++) {
      const r = readOnce(fd, mapping.start);
      if (r.payload !== null) return { mapping, ...r };
    }
    throw new Error('the process context kept changing during 100 reads');
  } finally {
    fs.closeSync(fd);
  }
}

// protoc's text format -> plain objects; repeated fields become arrays.
function parseTextFormat(text) {
  const root = {};
  const stack = [root];
  const add = (obj, key, value) => { (obj[key] ||= []).push(value); };
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    if (line === '}') { stack.pop(); continue; }
    let m = /^(\w+) \{$/.exec(line);
    if (m) { const child = {}; add(stack[stack.length - 1], m[1], child); stack.push(child); continue; }
    m = /^(\w+): (.*)$/.exec(line);
    if (!m) throw new Error(`unexpected protoc output line: ${line}`);
    add(stack[stack.length - 1], m[1], m[2].startsWith('"') ? unescapeString(m[2]) : m[2]);
  }
  return root;
}

// A C-escaped, double-quoted protoc string -> JS string (bytes decoded as UTF-8).
function unescapeString(quoted) {
  const body = quoted.slice(1, -1);
  const bytes = [];
  const simple = { n: 10, r: 13, t: 9, '"': 34, "'": 39, '\\': 92 };
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c !== '\\') { bytes.push(...Buffer.from(c, 'utf8')); continue; }
    const n = body[++i];
    if (/[0-7]/.test(n)) {
      let oct = n;
      while (oct.length < 3 && /[0-7]/.test(body[i + 1])) oct += body[++i];
      bytes.push(parseInt(oct, 8));
    } else if (n === 'x') {
      let hex = '';
      while (hex.length < 2 && /[0-9a-fA-F]/.test(body[i + 1])) hex += body[++i];
      bytes.push(parseInt(hex, 16));
    } else if (n in simple) bytes.push(simple[n]);
    else throw new Error(`unknown escape \\${n} in ${quoted}`);
  }
  return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bytes));
}

function protocDecode(type, bytes) {
  const dir = protoFile();
  return execFileSync('protoc', [`--proto_path=${dir}`, `--decode=otelctx.${type}`, 'process_context.proto'],
    { input: bytes, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'], maxBuffer: 256 << 20 });
}

// AnyValue object -> JS value.
function anyValue(v) {
  if (v === undefined) return undefined;
  if (v.string_value) return v.string_value[0];
  if (v.int_value) return Number(v.int_value[0]);
  if (v.double_value) return Number(v.double_value[0]);
  if (v.bool_value) return v.bool_value[0] === 'true';
  if (v.array_value) return (v.array_value[0].values || []).map(anyValue);
  return undefined;
}

function keyValues(list) {
  const out = {};
  for (const kv of list || []) out[kv.key[0]] = anyValue(kv.value && kv.value[0]);
  return out;
}

function toContext(message) {
  return {
    resource: keyValues(message.resource && message.resource[0].attributes),
    attributes: keyValues(message.attributes),
  };
}

/** Decodes one ProcessContext payload with protoc: { resource: {k: v}, attributes: {k: v} }. */
function decodePayload(payload) {
  return toContext(parseTextFormat(protocDecode('ProcessContext', payload)));
}

/** Decodes many payloads in one protoc run (as a Batch message); throws if any fails to parse. */
function decodePayloads(payloads) {
  const parts = [];
  for (const p of payloads) {
    let len = p.length;
    const varint = [];
    do { varint.push((len & 0x7f) | (len > 0x7f ? 0x80 : 0)); len >>>= 7; } while (len > 0);
    parts.push(Buffer.from([0x0a, ...varint]), p);
  }
  const parsed = parseTextFormat(protocDecode('Batch', Buffer.concat(parts)));
  return (parsed.items || []).map(toContext);
}

module.exports = { hasProtoc, findMapping, readOnce, readProcessContext, decodePayload, decodePayloads, parseHeader };
