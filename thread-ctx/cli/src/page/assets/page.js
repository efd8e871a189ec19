'use strict';
// The page of `thread-ctx report --serve/--html`: its data is inline (an export) or at
// /api/data (served), flame graphs inline or at /api/flame. Plain DOM; the flame graph is
// d3-flame-graph's.
(function () {
  const inline = document.getElementById('page-data');
  let DATA = null;
  const CAUSES = [
    ['own_cpu_ms', 'own CPU'], ['held_cpu_ms', 'other requests on its thread, on CPU'], ['held_off_cpu_ms', 'other requests on its thread, blocked'],
    ['no_span_cpu_ms', 'CPU of no span'], ['blocked_ms', 'blocked in it'], ['runnable_ms', 'waiting for a CPU'], ['idle_ms', 'idle (awaiting, downstream)'],
  ];
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v; else if (k.startsWith('on')) e.addEventListener(k.slice(2), v); else if (v !== undefined && v !== null) e.setAttribute(k, v);
    }
    for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
    return e;
  };
  const ms = (v) => (v === null || v === undefined ? '-' : Number(v).toFixed(1));
  const stop = (f) => (ev) => { ev.stopPropagation(); f(ev); };

  // A bar of where a request's time went, each part as wide as its share of the duration.
  function causeBar(c) {
    const bar = el('div', { class: 'cause-bar' });
    if (!c || !c.enriched) { bar.title = 'not enriched: no profile covered it'; return bar; }
    const total = Math.max(c.duration_ms, 1e-9);
    let sum = 0;
    const tip = [`${ms(c.duration_ms)} ms`];
    for (const [k, name] of CAUSES) {
      const v = c[k];
      if (!v) continue;
      sum += v;
      bar.append(el('span', { class: `c-${k}`, style: `width:${(100 * v) / total}%`, title: `${name}: ${ms(v)} ms` }));
      tip.push(`${name} ${ms(v)} ms`);
    }
    if (sum < total) bar.append(el('span', { class: 'c-rest', style: `width:${(100 * (total - sum)) / total}%`, title: `not accounted for: ${ms(total - sum)} ms` }));
    bar.title = tip.join('\n');
    return bar;
  }

  function legend() {
    const l = document.getElementById('legend');
    for (const [k, name] of CAUSES) l.append(el('span', null, el('i', { class: `c-${k}` }), name));
    l.append(el('span', null, el('i', { class: 'c-rest' }), 'not accounted for'));
  }

  function jaegerLink(trace) {
    const j = DATA.meta.jaeger;
    return j ? el('a', { class: 'button jaeger', href: `${j}/trace/${trace}`, target: '_blank', rel: 'noopener', onclick: (e) => e.stopPropagation() }, 'Jaeger') : null;
  }

  function requestRow(r, extra) {
    return el('tr', { 'data-trace': r.trace_id, onclick: () => go(`trace/${r.trace_id}`) },
      el('td', { class: 'num' }, ms(r.duration_ms)), el('td', null, r.service), el('td', null, r.route),
      el('td', null, causeBar(r.causes)), extra !== undefined ? el('td', { class: 'num' }, extra) : null,
      el('td', { class: 'trace-id' }, r.trace_id.slice(0, 16), ' ', jaegerLink(r.trace_id)));
  }

  function fillRoutes() {
    const tb = document.querySelector('#routes tbody');
    for (const r of DATA.routes) {
      tb.append(el('tr', { 'data-route': r.route, onclick: () => go(`route/${encodeURIComponent(r.route)}`) },
        el('td', null, r.route), el('td', { class: 'num' }, r.requests), el('td', { class: 'num' }, ms(r.p50_ms)), el('td', { class: 'num' }, ms(r.p90_ms)),
        el('td', { class: 'num' }, ms(r.p99_ms)), el('td', { class: 'num' }, ms(r.max_ms)), el('td', null, causeBar(r.causes)),
        el('td', null, flameButton('route', r.route))));
    }
    const sb = document.querySelector('#slowest tbody');
    for (const r of DATA.slowest) sb.append(requestRow(r));
  }

  function flameButton(of, key) {
    return DATA.meta.kinds.length ? el('button', { class: 'flame-button', onclick: stop(() => go(`flame/${of}/${DATA.meta.kinds[0]}/${encodeURIComponent(key)}`)) }, 'flame graph') : null;
  }

  // Who made whom wait: sortable; a row opens the requests it delayed.
  let sortKey = 'ms', sortDesc = true;
  function fillHolders() {
    const tb = document.querySelector('#holders tbody');
    tb.textContent = '';
    const rows = [...DATA.holders].sort((a, b) => {
      const x = a[sortKey] ?? '', y = b[sortKey] ?? '';
      const c = typeof x === 'number' ? x - y : String(x).localeCompare(String(y));
      return sortDesc ? -c : c;
    });
    rows.forEach((h) => {
      const i = DATA.holders.indexOf(h);
      tb.append(el('tr', { 'data-holder': i, onclick: () => go(`holder/${i}`) },
        el('td', null, h.route), el('td', { class: 'mono' }, h.frame ?? '-'), el('td', { class: 'num' }, ms(h.ms)),
        el('td', { class: 'num' }, h.delayed), el('td', { class: 'num' }, `${Math.round(100 * h.share)} %`),
        el('td', null, h.frame && h.route !== '(others)' ? flameButton('holder', h.route) : null)));
    });
    document.querySelectorAll('#holders th[data-sort]').forEach((th) => {
      th.classList.toggle('sorted', th.dataset.sort === sortKey);
      th.dataset.dir = th.dataset.sort === sortKey ? (sortDesc ? 'desc' : 'asc') : '';
    });
  }
  document.querySelectorAll('#holders th[data-sort]').forEach((th) => th.addEventListener('click', () => {
    if (sortKey === th.dataset.sort) sortDesc = !sortDesc; else { sortKey = th.dataset.sort; sortDesc = typeof DATA.holders[0]?.[sortKey] === 'number'; }
    fillHolders();
  }));

  // The detail panel: a trace, a route, a holder or a flame graph, as the location's hash says.
  const detail = document.getElementById('detail');
  function show(title, ...body) {
    detail.hidden = false;
    detail.textContent = '';
    detail.append(el('button', { class: 'close', onclick: () => go('') }, 'close'), el('h2', null, title), ...body.filter((b) => b !== null && b !== undefined));
    detail.scrollIntoView({ block: 'start' });
  }

  function showTrace(id) {
    const t = DATA.traces[id];
    if (!t) return show(`trace ${id}`, el('p', { class: 'note' }, 'not among the requests this page lists'));
    const spans = t.spans;
    const t0 = Math.min(...spans.map((s) => s.start_unix_ns));
    const end = Math.max(...spans.map((s) => s.start_unix_ns + s.duration_ms * 1e6));
    const span = Math.max(end - t0, 1);
    const depth = new Map();
    const tb = el('tbody');
    for (const s of spans) {
      const d = s.parent && depth.has(s.parent) ? depth.get(s.parent) + 1 : 0;
      depth.set(s.span_id, d);
      const info = el('td', { style: `padding-left:${4 + 14 * d}px` }, el('b', null, s.service), ' ', s.name);
      // Who held its thread, by route and line (as report --traces --slowest says it), then
      // the heaviest single holders, each a trace of its own.
      for (const h of s.causes.held_by || []) info.append(el('div', { class: 'holder' }, `held by ${h.route} ${ms(h.ms)} ms: `, el('span', { class: 'mono' }, h.frame)));
      for (const h of s.holders.slice(0, 3)) info.append(el('div', { class: 'holder-trace' }, `held by the request ${h.route} `, el('a', { href: `#trace/${h.trace_id}` }, h.trace_id.slice(0, 16)), ` ${ms(h.ms)} ms: `, el('span', { class: 'mono' }, h.frame)));
      for (const f of (s.causes.own_frames || []).slice(0, 3)) info.append(el('div', { class: 'frame-line' }, `own CPU ${ms(f.ms)} ms: `, el('span', { class: 'mono' }, f.frame)));
      if (s.path.length) {
        const p = el('div', { class: 'path' }, el('div', { class: 'hop' }, 'critical path (the connector\'s thread_ctx.path):'));
        for (const h of s.path) p.append(el('div', { class: 'hop critical' }, `→ ${h.hop} ${ms(h.ms)} ms`, h.cause ? `: ${h.cause}` : ''));
        if (s.path_others_ms) p.append(el('div', { class: 'hop' }, `other hops ${ms(s.path_others_ms)} ms`));
        info.append(p);
      }
      const left = (100 * (s.start_unix_ns - t0)) / span, width = Math.max((100 * s.duration_ms * 1e6) / span, 0.3);
      tb.append(el('tr', { 'data-span': s.span_id, 'data-parent': s.parent, 'data-service': s.service, 'data-depth': d },
        info, el('td', { class: 'num' }, ms(s.duration_ms)),
        el('td', { style: 'width:25%' }, el('div', { class: 'timeline' }, el('div', { style: `left:${left}%;width:${width}%` }))),
        el('td', { style: 'width:25%' }, causeBar(s.causes))));
    }
    const head = el('thead', null, el('tr', null, el('th', null, 'span'), el('th', null, 'ms'), el('th', null, 'when'), el('th', null, 'where its time went')));
    show(el('span', null, `request ${id} `, flameButton('trace', id), jaegerLink(id)),
      t.left_out ? el('p', { class: 'note' }, `${t.left_out} more spans not shown`) : null,
      el('table', { class: 'waterfall', id: 'trace' }, head, tb));
  }

  function showRoute(route) {
    const r = DATA.routes.find((x) => x.route === route);
    if (!r) return show(route, el('p', { class: 'note' }, 'no such route'));
    const tb = el('tbody');
    for (const q of r.slow) tb.append(requestRow(q));
    const held = el('div', null, ...(r.causes.held_by || []).map((h) => el('div', { class: 'holder' }, `held by ${h.route} ${ms(h.ms)} ms per request: `, el('span', { class: 'mono' }, h.frame))));
    show(el('span', null, `${route}: its slowest requests `, flameButton('route', route)), causeBar(r.causes), held,
      el('table', { class: 'list', id: 'route-requests' }, el('thead', null, el('tr', null, el('th', null, 'ms'), el('th', null, 'service'), el('th', null, 'route'), el('th', null, 'where the time went'), el('th', null, 'trace'))), tb));
  }

  function showHolder(i) {
    const h = DATA.holders[i];
    if (!h) return show('holder', el('p', { class: 'note' }, 'no such holder'));
    const tb = el('tbody');
    for (const d of h.requests) tb.append(requestRow(d.request, ms(d.ms)));
    show(el('span', null, `${h.route} `, el('span', { class: 'mono' }, h.frame ?? ''), `: ${ms(h.ms)} ms inflicted on ${h.delayed} requests `, h.frame ? flameButton('holder', h.route) : null),
      h.requests.length ? el('table', { class: 'list', id: 'delayed' }, el('thead', null, el('tr', null, el('th', null, 'ms'), el('th', null, 'service'), el('th', null, 'route'), el('th', null, 'where its time went'), el('th', null, 'held ms'), el('th', null, 'trace'))), tb)
        : el('p', { class: 'note' }, 'no request listed'));
  }

  // Folded stacks to d3-flame-graph's tree; JS frames (`_[j]`) named `fn (file:line)`.
  function tree(stacks) {
    const root = { name: 'all', value: 0, children: [] };
    for (const [line, value] of stacks) {
      let node = root;
      root.value += value;
      for (const raw of line.split(';')) {
        let name = raw, js = false;
        const m = /^(.*) (\S+?):?(\d+)?_\[j\]$/.exec(raw);
        if (m) { js = true; const file = m[2].split('/').pop(); name = `${m[1]} (${file}${m[3] ? `:${m[3]}` : ''})`; } else if (raw.endsWith('_[j]')) { js = true; name = raw.slice(0, -4); } else if (raw.endsWith('_[k]')) name = raw.slice(0, -4);
        let child = node.children.find((c) => c.name === name);
        if (!child) { child = { name, value: 0, children: [], js }; node.children.push(child); }
        child.value += value;
        node = child;
      }
    }
    return root;
  }

  async function flameData(of, kind, key) {
    const name = `${of === 'holder' ? 'route' : of}:${kind}:${key}`;
    if (inline) return DATA.flames[name] ?? { stacks: [], total: 0, unit: '', left_out: 0 };
    const res = await fetch(`/api/flame?of=${of}&kind=${kind}&key=${encodeURIComponent(key)}`);
    if (!res.ok) throw new Error(await res.text());
    return res.json();
  }

  async function showFlame(of, kind, key) {
    const kinds = el('span', null, ...DATA.meta.kinds.map((k) => el('button', { class: k === kind ? 'on' : '', 'data-kind': k, onclick: () => go(`flame/${of}/${k}/${encodeURIComponent(key)}`) }, k)));
    const chart = el('div', { id: 'flame' });
    const note = el('p', { class: 'note' }, 'folding…');
    show(el('span', null, `flame graph of ${of} ${key} `, kinds), note, chart);
    const f = await flameData(of, kind, key);
    if (!f.total) { note.textContent = `no ${kind} samples of this ${of}`; return; }
    note.textContent = `${f.total} ${f.unit}${f.left_out ? `; ${f.left_out} lighter stacks left out` : ''}; click a frame to zoom`;
    const width = Math.max(chart.clientWidth, 600);
    const g = flamegraph.default().width(width).cellHeight(18).transitionDuration(0).minFrameSize(2).sort(true).title('')
      .label((d) => `${d.data.name}: ${d.data.value} ${f.unit} (${((100 * d.data.value) / f.total).toFixed(1)} %)`);
    const root = tree(f.stacks);
    d3.select(chart).datum(root).call(g);
    d3.select(chart).selectAll('g.frame').attr('data-js', (d) => (d.data.js ? '1' : null));
    // The widest JS frames: each one's width summed over where it is drawn (a recursive frame
    // counted at its outermost), the functions to read first.
    const drawn = new Map();
    const walk = (n, open) => {
      const counted = n.js && !open.has(n.name);
      if (counted) drawn.set(n.name, (drawn.get(n.name) || 0) + n.value);
      if (counted) open.add(n.name);
      for (const c of n.children) walk(c, open);
      if (counted) open.delete(n.name);
    };
    walk(root, new Set());
    const widest = [...drawn].sort((a, b) => b[1] - a[1]).slice(0, 5);
    detail.append(el('h3', null, 'widest JS frames'), el('ol', { id: 'widest' }, ...widest.map(([name, v]) =>
      el('li', null, el('span', { class: 'mono' }, name), ` ${v} ${f.unit} (${((100 * v) / f.total).toFixed(1)} %)`))));
  }

  function route() {
    const [what, ...rest] = location.hash.slice(1).split('/');
    if (what === 'trace') return showTrace(rest[0]);
    if (what === 'route') return showRoute(decodeURIComponent(rest.join('/')));
    if (what === 'holder') return showHolder(Number(rest[0]));
    if (what === 'flame') return showFlame(rest[0], rest[1], decodeURIComponent(rest.slice(2).join('/'))).catch((e) => show('flame graph', el('p', { class: 'note' }, String(e.message))));
    detail.hidden = true;
  }
  function go(hash) { if (location.hash.slice(1) === hash) route(); else location.hash = hash; }
  window.addEventListener('hashchange', route);

  async function start() {
    DATA = inline ? JSON.parse(inline.textContent) : await (await fetch('/api/data')).json();
    const m = DATA.meta;
    document.getElementById('source').textContent = `${m.traces_file}: ${DATA.spans} spans, ${DATA.requests} requests of ${DATA.routes.length} routes` +
      (m.profiles_file ? `; flame graphs from ${m.profiles_file}` : '; no profiles file (report --otlp FILE adds flame graphs)') +
      (m.jaeger ? `; traces open in ${m.jaeger}` : '');
    legend();
    fillRoutes();
    fillHolders();
    document.body.dataset.ready = '1';
    route();
  }
  start().catch((e) => { document.getElementById('source').textContent = `could not read the data: ${e.message}`; throw e; });
})();
