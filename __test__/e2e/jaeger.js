'use strict';
// Reads spans back from Jaeger's HTTP query API (api/v3: OTLP as JSON, attributes typed as
// stored, string arrays kept), as plain objects: { traceId, spanId, name, route, startMs, endMs,
// durationMs, server (a server span), attrs: { key: value }, events: [{ name, attrs }] }.

function anyValue(v) {
  if (v === undefined || v === null) return undefined;
  if ('stringValue' in v) return v.stringValue;
  if ('doubleValue' in v) return Number(v.doubleValue);
  if ('intValue' in v) return Number(v.intValue);
  if ('boolValue' in v) return v.boolValue;
  if ('arrayValue' in v) return (v.arrayValue.values || []).map(anyValue);
  return undefined;
}

function attributes(list) {
  return Object.fromEntries((list || []).map((kv) => [kv.key, anyValue(kv.value)]));
}

// Ids may come as hex (Jaeger's gateway) or base64 (plain protobuf JSON): hex either way.
function hexId(id, bytes) {
  if (typeof id !== 'string') return '';
  return /^[0-9a-f]+$/i.test(id) && id.length === bytes * 2 ? id.toLowerCase() : Buffer.from(id, 'base64').toString('hex');
}

// OTLP JSON spells a span's kind as its number or its enum name.
const isServer = (kind) => kind === 2 || kind === 'SPAN_KIND_SERVER';

function spansOf(result) {
  const out = [];
  for (const rs of result?.resourceSpans || []) {
    const resource = attributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans || []) {
      for (const s of ss.spans || []) {
        const attrs = attributes(s.attributes);
        const startMs = Number(BigInt(s.startTimeUnixNano) / 1000n) / 1000;
        const endMs = Number(BigInt(s.endTimeUnixNano) / 1000n) / 1000;
        out.push({
          traceId: hexId(s.traceId, 16), spanId: hexId(s.spanId, 8), name: s.name, route: attrs['http.route'], server: isServer(s.kind),
          startMs, endMs, durationMs: endMs - startMs, attrs, resource,
          events: (s.events || []).map((e) => ({ name: e.name, attrs: attributes(e.attributes) })),
        });
      }
    }
  }
  return out;
}

/** Every span of `service` that started between `fromMs` and `toMs` (wall clock). */
async function findSpans(queryPort, service, fromMs, toMs, numTraces = 20_000) {
  const q = new URLSearchParams({
    'query.service_name': service,
    'query.start_time_min': new Date(fromMs).toISOString(),
    'query.start_time_max': new Date(toMs).toISOString(),
    'query.num_traces': String(numTraces),
    // As stored: no clock-skew adjustment of Jaeger's own.
    'query.raw_traces': 'true',
  });
  const res = await fetch(`http://127.0.0.1:${queryPort}/api/v3/traces?${q}`);
  if (res.status === 404) return [];
  if (!res.ok) throw new Error(`Jaeger answered ${res.status}: ${await res.text()}`);
  return spansOf((await res.json()).result);
}

module.exports = { findSpans, spansOf };
