// Agent charts from the metrics API (GET /v1/metrics): runs, latency
// percentiles, tokens, cost, error rate and eval scores over time, one line
// per value of a metadata key. Drawn as inline SVG (no chart library); every
// point has a tooltip and each chart a text summary for screen readers.

import { optional } from './api.js';
import { clear, fmtCost, fmtInt, fmtMS, fmtPct, fmtTokens, h } from './dom.js';

const enc = encodeURIComponent;
const COLORS = ['var(--accent)', 'var(--ok)', 'var(--warn)', 'var(--wait)', 'var(--bad)', 'var(--run)'];
const RANGES = { '24h': [24 * 3600e3, 'hour'], '7d': [7 * 86400e3, 'hour'], '30d': [30 * 86400e3, 'day'] };

// CHARTS lists what is drawn: a title, the lines (a field per line, or one
// line per series), and how values read.
const CHARTS = [
  { key: 'runs', title: 'Runs', fields: ['runs'], fmt: fmtInt },
  { key: 'latency', title: 'Run latency p50 / p95 / p99 (created to finished)', fields: ['latency_p50_ms', 'latency_p95_ms', 'latency_p99_ms'], fmt: fmtMS, total: true },
  { key: 'tokens', title: 'Tokens (input + output)', fields: ['input_tokens', 'output_tokens'], sum: true, fmt: fmtTokens },
  { key: 'cost', title: 'Cost', fields: ['cost'], fmt: fmtCost },
  { key: 'errors', title: 'Error rate', fields: ['error_rate'], fmt: fmtPct },
  { key: 'evals', title: 'Eval score (average)', fields: ['eval_score_avg'], fmt: (v) => v.toFixed(2) },
];

// chartsSection renders the charts of an agent with their controls.
export function chartsSection(agent) {
  const range = h('select', { id: 'chart-range', 'aria-label': 'Time range' }, Object.keys(RANGES).map((k) => h('option', { value: k, text: 'last ' + k, selected: k === '7d' })));
  const split = h('input', { id: 'chart-split', type: 'text', placeholder: 'split by metadata key (e.g. region)', 'aria-label': 'Split by metadata key' });
  const grid = h('div', { class: 'charts' }, h('p', { class: 'loading', text: 'Loading the metrics…' }));
  const sec = h('section', { class: 'card charts-card', 'aria-label': 'Charts' }, h('div', { class: 'card-head' }, h('h2', { text: 'Over time' }), range, split), grid);
  let seq = 0;
  const load = async () => {
    const my = ++seq;
    const [span, bucket] = RANGES[range.value];
    const to = new Date(), from = new Date(to.getTime() - span);
    const q = `agent=${enc(agent)}&from=${enc(from.toISOString())}&to=${enc(to.toISOString())}&bucket=${bucket}` + (split.value.trim() ? '&split=' + enc(split.value.trim()) : '');
    try {
      const m = await optional('/v1/metrics?' + q);
      if (my !== seq) return;
      if (m === undefined) { clear(grid, h('p', { class: 'muted', text: 'Charts need the metrics API, which this server does not have.' })); return; }
      const series = (m.series || []).filter((s) => s.points?.length);
      if (!series.length) { clear(grid, h('p', { class: 'muted', text: 'No runs in this range.' })); return; }
      clear(grid, CHARTS.map((c) => chart(c, series, from.getTime(), to.getTime())));
    } catch (e) {
      if (my === seq) clear(grid, h('p', { class: 'error', text: 'Could not load the metrics: ' + e.message }));
    }
  };
  range.addEventListener('change', load);
  let t;
  split.addEventListener('input', () => { clearTimeout(t); t = setTimeout(load, 400); });
  load();
  return sec;
}

const W = 420, H = 170, L = 52, R = 10, T = 10, B = 24;

// chart draws one chart: a line per series (or per field, for the total).
function chart(c, series, t0, t1) {
  const lines = [];
  series.forEach((s, i) => {
    const name = s.key === '' || s.key === undefined ? 'all' : String(s.key);
    if (c.fields.length > 1 && !c.sum) {
      // Percentiles: one line each, for every series (dash per percentile).
      c.fields.forEach((f, j) => lines.push({ name: `${name} ${f.replace(/^latency_|_ms$/g, '')}`, color: COLORS[i % COLORS.length], dash: ['', '5 3', '2 3'][j], pts: s.points.map((p) => [Date.parse(p.t), p[f]]) }));
    } else {
      lines.push({ name, color: COLORS[i % COLORS.length], dash: '', pts: s.points.map((p) => [Date.parse(p.t), c.fields.reduce((a, f) => (p[f] === null || p[f] === undefined ? a : (a ?? 0) + p[f]), null)]) });
    }
  });
  const vals = lines.flatMap((l) => l.pts.map((p) => p[1])).filter((v) => typeof v === 'number' && isFinite(v));
  const max = Math.max(...vals, 0) || 1;
  const x = (t) => L + ((t - t0) / Math.max(1, t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const svg = h('svg:svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': `${c.title}: ${lines.map((l) => l.name).join(', ')}`, dataset: { chart: c.key } });
  for (const f of [0, 0.5, 1]) {
    svg.appendChild(h('svg:line', { x1: L, x2: W - R, y1: y(max * f), y2: y(max * f), class: 'grid-line' }));
    svg.appendChild(h('svg:text', { x: L - 6, y: y(max * f) + 4, 'text-anchor': 'end', class: 'axis' }, c.fmt(max * f)));
  }
  for (const [t, anchor] of [[t0, 'start'], [t1, 'end']]) svg.appendChild(h('svg:text', { x: x(t), y: H - 6, 'text-anchor': anchor, class: 'axis' }, new Date(t).toLocaleDateString(undefined, { month: 'short', day: 'numeric', hour: '2-digit' })));
  const summary = [];
  for (const l of lines) {
    const pts = l.pts.filter((p) => typeof p[1] === 'number' && isFinite(p[1]));
    if (!pts.length) continue;
    svg.appendChild(h('svg:polyline', { points: pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' '), class: 'series', style: { stroke: l.color }, 'stroke-dasharray': l.dash || undefined, dataset: { series: l.name } }));
    for (const p of pts) svg.appendChild(h('svg:circle', { cx: x(p[0]).toFixed(1), cy: y(p[1]).toFixed(1), r: '2.5', class: 'pt', style: { fill: l.color } }, h('svg:title', { text: `${l.name} · ${new Date(p[0]).toLocaleString()} · ${c.fmt(p[1])}` })));
    summary.push(`${l.name}: last ${c.fmt(pts[pts.length - 1][1])}`);
  }
  return h('figure', { class: 'chart-box' }, h('figcaption', { text: c.title }), svg,
    h('ul', { class: 'inline-legend small' }, lines.map((l) => h('li', null, h('i', { class: 'swatch', style: { background: l.color } }), l.name))),
    h('p', { class: 'muted small sr-summary', text: summary.join(' · ') || 'no data' }));
}
