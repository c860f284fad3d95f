// The workflow graph (seed 003) of a session or of an agent: states as
// boxes, actions as labelled edges (forward solid, backward dashed, self
// loops), repeated and stuck states highlighted. The layout comes from the
// server; this draws it as SVG. Clicking a state lists its steps.

import { api } from './api.js';
import { sessionLink, sessionName, sessionOf } from './names.js';
import { badge, clear, clip, fmtCost, fmtInt, fmtMS, fmtTokens, h, route, shortID, toast } from './dom.js';

const enc = encodeURIComponent;

export function graphView(main, { session, agent, query }) {
  let zoom = 1, g = null, selected = null, closed = false;
  const n = query.sessions || '50', repeat = query.repeat || '3';
  const back = session ? sessionLink(session) : h('a', { href: route(['a', agent]), text: agent });
  const stats = h('div', { class: 'meta', role: 'status' });
  const canvas = h('div', { class: 'graph-canvas', tabindex: '0', 'aria-label': 'Workflow graph' }, h('p', { class: 'loading', text: 'Laying out the graph…' }));
  const side = h('aside', { class: 'detail graph-side', id: 'node-detail', 'aria-label': 'State detail', tabindex: '-1' }, h('p', { class: 'muted empty', text: 'Click a state to list its steps.' }));
  const controls = h('div', { class: 'toolbar' });
  if (agent) {
    const sel = h('select', { id: 'graph-sessions', 'aria-label': 'Sessions merged' }, ['10', '50', '100', '500'].map((v) => h('option', { value: v, text: 'newest ' + v + ' sessions', selected: v === n })));
    sel.addEventListener('change', () => { location.hash = route(['a', agent, 'graph'], { sessions: sel.value, repeat }); });
    controls.appendChild(sel);
  }
  const rep = h('select', { id: 'graph-repeat', 'aria-label': 'Repeat threshold' }, ['2', '3', '5', '10'].map((v) => h('option', { value: v, text: 'repeated at ' + v + '×', selected: v === repeat })));
  rep.addEventListener('change', () => { location.hash = route(session ? ['s', session, 'graph'] : ['a', agent, 'graph'], { sessions: agent ? n : undefined, repeat: rep.value }); });
  controls.append(rep,
    h('button', { type: 'button', class: 'icon', 'aria-label': 'Zoom out', text: '−', onclick: () => setZoom(zoom / 1.25) }),
    h('button', { type: 'button', 'aria-label': 'Fit to width', text: 'Fit', onclick: () => fit() }),
    h('button', { type: 'button', class: 'icon', 'aria-label': 'Zoom in', text: '+', onclick: () => setZoom(zoom * 1.25) }));
  const legend = h('div', { class: 'legend', 'aria-label': 'Legend' },
    h('span', { class: 'lg fwd', text: 'forward' }), h('span', { class: 'lg back', text: 'back to an earlier state (loop)' }), h('span', { class: 'lg self', text: 'same state again' }),
    h('span', { class: 'lg rep', text: 'repeated state' }), h('span', { class: 'lg stuck', text: 'stuck: same action repeated' }));
  clear(main, h('div', { class: 'page-head' }, h('div', { class: 'crumbs' }, back, ' / '), h('h1', { text: session ? 'Workflow graph' : 'Workflow graph of ' + agent }), stats, controls, legend),
    h('div', { class: 'split graph-split' }, canvas, side));

  const setZoom = (z) => {
    zoom = Math.max(0.2, Math.min(3, z));
    const svg = canvas.querySelector('svg');
    if (svg && g) { svg.setAttribute('width', String(g.width * zoom)); svg.setAttribute('height', String(g.height * zoom)); }
  };
  const fit = () => { if (g) setZoom(Math.min(1.5, (canvas.clientWidth - 16) / g.width)); };

  const url = session ? `/v1/sessions/${enc(session)}/graph?repeat=${enc(repeat)}` : `/v1/agents/${enc(agent)}/graph?sessions=${enc(n)}&repeat=${enc(repeat)}`;
  api(url).then((data) => {
    if (closed) return;
    g = data;
    clear(stats, `${fmtInt(g.steps)} steps · ${fmtInt(g.nodes.length)} states · ${fmtInt(g.edges.length)} transitions · `,
      h('span', { title: 'share of steps that revisit a state (0–1)' }, `repeated-step ratio ${g.repeated_step_ratio.toFixed(2)}`),
      ` · ${g.loops} loop edges`, g.stuck_nodes ? [' · ', h('strong', { class: 'error', text: `${g.stuck_nodes} stuck state${g.stuck_nodes > 1 ? 's' : ''}` })] : '',
      agent ? ` · ${g.sessions} sessions, ${g.runs} runs` : '', g.merged_states ? ` · ${g.merged_states} rare states merged` : '');
    if (!g.nodes.length) { clear(canvas, h('p', { class: 'empty muted', text: 'No steps yet.' })); return; }
    const svg = draw(g, (node) => select(node));
    clear(canvas, svg);
    // Edge labels may reach past the layout's box: widen the drawing to them.
    const bb = svg.getBBox();
    g.width = Math.max(g.width, Math.ceil(bb.x + bb.width + 16));
    g.height = Math.max(g.height, Math.ceil(bb.y + bb.height + 16));
    svg.setAttribute('viewBox', `0 0 ${g.width} ${g.height}`);
    setZoom(1);
    if (g.width > canvas.clientWidth) fit();
    const q = query.node && g.nodes.find((x) => x.id === query.node);
    if (q) select(q);
  }).catch((e) => { clear(canvas, h('p', { class: 'error', text: 'Could not load the graph: ' + e.message })); toast(e.message, 'error'); });

  const select = (node) => {
    selected?.classList.remove('sel');
    selected = canvas.querySelector(`[data-node="${node.id}"]`);
    selected?.classList.add('sel');
    const byID = new Map(g.nodes.map((x) => [x.id, x]));
    const out = g.edges.filter((e) => e.from === node.id), inc = g.edges.filter((e) => e.to === node.id);
    const edgeList = (list, dir) => list.length ? h('ul', { class: 'edges' }, list.map((e) => {
      const other = byID.get(dir === 'out' ? e.to : e.from);
      return h('li', null, h('span', { class: 'muted', text: dir === 'out' ? '→ ' : '← ' }), h('button', { type: 'button', class: 'link', text: other.label, onclick: () => select(other) }),
        h('span', { class: 'muted small', text: ` ×${e.count} · ` + e.actions.slice(0, 3).map((a) => `${a.label} (${a.count})`).join(', ') }));
    })) : h('p', { class: 'muted small', text: 'none' });
    clear(side,
      h('header', { class: 'd-head' }, h('div', null, badge(node.kind, 'kind'), h('strong', { class: 'd-name', text: node.name }), node.stuck ? badge('stuck') : null, node.repeated ? badge('repeated') : null),
        h('p', { class: 'state-label', text: node.label })),
      h('dl', { class: 'kv' },
        h('dt', { text: 'visits' }), h('dd', { text: `${fmtInt(node.visits)} (max ${node.max_run_visits} in one run)` }),
        h('dt', { text: 'runs' }), h('dd', { text: `${node.runs} in ${node.sessions} session${node.sessions > 1 ? 's' : ''}` }),
        node.errors ? [h('dt', { text: 'errors' }), h('dd', { class: 'error', text: fmtInt(node.errors) })] : null,
        h('dt', { text: 'time' }), h('dd', { text: fmtMS(node.duration_ms || 0) + (node.visits > 1 ? ` (avg ${fmtMS((node.duration_ms || 0) / node.visits)})` : '') }),
        node.tokens ? [h('dt', { text: 'tokens' }), h('dd', { text: fmtTokens(node.tokens) })] : null,
        node.cost ? [h('dt', { text: 'cost' }), h('dd', { text: fmtCost(node.cost) })] : null),
      h('h3', { text: 'Leads to' }), edgeList(out, 'out'), h('h3', { text: 'Comes from' }), edgeList(inc, 'in'),
      h('h3', { text: `Steps (${fmtInt(node.visits)})` }),
      h('ol', { class: 'node-steps', 'aria-label': 'Steps of this state' }, node.steps.map((s) => h('li', null,
        sampleLink(s, !session),
        ' ', badge(s.kind, 'kind'), s.status !== 'completed' ? [' ', badge(s.status)] : null))),
      node.steps.length < node.visits ? h('p', { class: 'muted small', text: `first ${node.steps.length} shown` }) : null);
    side.focus();
  };

  return () => { closed = true; };
}

// draw renders the graph as SVG; onSelect is called with a clicked node.
function draw(g, onSelect) {
  const svg = h('svg:svg', { viewBox: `0 0 ${g.width} ${g.height}`, width: g.width, height: g.height, class: 'graph', role: 'group', 'aria-label': `${g.nodes.length} states` });
  const defs = h('svg:defs');
  for (const [id, cls] of [['a-fwd', 'm-fwd'], ['a-back', 'm-back'], ['a-self', 'm-self']]) {
    defs.appendChild(h('svg:marker', { id, class: cls, viewBox: '0 0 10 10', refX: '9', refY: '5', markerUnits: 'userSpaceOnUse', markerWidth: '9', markerHeight: '9', orient: 'auto-start-reverse' }, h('svg:path', { d: 'M0,0 L10,5 L0,10 z' })));
  }
  svg.appendChild(defs);
  const edges = h('svg:g', { class: 'edges' }), labels = h('svg:g', { class: 'labels' }), nodes = h('svg:g', { class: 'nodes' });
  const clusters = h('svg:g', { class: 'clusters' });
  // Sub-agents: their states (hop > 0) framed as a labelled cluster.
  const boxes = g.nodes.map((nd) => [nd.x - 4, nd.y - 4, nd.x + nd.w + 4, nd.y + nd.h + 4]);
  for (const c of subAgentClusters(g)) {
    clusters.appendChild(h('svg:g', { class: 'cluster', dataset: { hop: String(c.hop) } },
      h('svg:rect', { x: c.x, y: c.y, width: c.w, height: c.h, rx: '12' }),
      h('svg:text', { x: c.x + 10, y: c.y + 15, class: 'clabel' }, c.label)));
    boxes.push([c.x, c.y, c.x + c.w, c.y + 20]);
  }
  const placed = [];
  for (const e of g.edges) {
    const cls = e.direction === 'forward' ? 'fwd' : e.direction === 'backward' ? 'back' : 'self';
    const w = Math.min(3.5, 1.1 + Math.log2(e.count) / 2.5);
    edges.appendChild(h('svg:path', { d: pathOf(e.points), class: 'edge ' + cls, 'stroke-width': w.toFixed(1), 'marker-end': `url(#a-${cls})`, dataset: { edge: e.id } },
      h('svg:title', { text: `${e.count}× ` + e.actions.map((a) => `${a.label} (${a.count})`).join(', ') })));
    const top = e.actions[0];
    const text = clip(top ? top.label : '', 26) + (e.actions.length > 1 ? ` +${e.actions.length - 1}` : '') + ` ×${e.count}`;
    const [x, y] = placeLabel(e.points, cls === 'self', text, boxes, placed);
    labels.appendChild(h('svg:text', { x, y, class: 'elabel ' + cls, 'text-anchor': 'start', dataset: { edge: e.id } }, text));
  }
  for (const nd of g.nodes) {
    const flags = [nd.stuck ? 'stuck' : '', nd.repeated ? 'repeated' : '', nd.loop ? 'loop' : '', nd.other ? 'other' : '', 'kind-' + nd.kind];
    const el = h('svg:g', { class: ['node', ...flags], transform: `translate(${nd.x},${nd.y})`, tabindex: '0', role: 'button', dataset: { node: nd.id },
      'aria-label': `${nd.name}: ${nd.label}, ${nd.visits} visits${nd.stuck ? ', stuck' : nd.repeated ? ', repeated' : ''}` },
      h('svg:rect', { width: nd.w, height: nd.h, rx: '8' }),
      h('svg:rect', { class: 'kindbar', width: '5', height: nd.h, rx: '2' }),
      h('svg:text', { x: '14', y: '22', class: 'nlabel' }, clip(nd.label, 23)),
      h('svg:text', { x: '14', y: '41', class: 'nsub' }, `${clip(nd.name, 14)} · ${fmtInt(nd.visits)}×` + (nd.errors ? ` · ${nd.errors} err` : '') + (nd.entries ? ' · start' : '')),
      nd.stuck || nd.repeated ? h('svg:text', { x: String(nd.w - 10), y: '22', 'text-anchor': 'end', class: 'nflag' }, nd.stuck ? '⚠' : '↻') : null,
      h('svg:title', { text: `${nd.name}: ${nd.label}` }));
    el.addEventListener('click', () => onSelect(nd));
    el.addEventListener('keydown', (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); onSelect(nd); } });
    nodes.appendChild(el);
  }
  svg.append(clusters, edges, nodes, labels);
  return svg;
}

// pathOf draws a polyline with rounded bends.
function pathOf(pts) {
  if (!pts?.length) return '';
  let d = `M${pts[0][0]},${pts[0][1]}`;
  for (let i = 1; i < pts.length - 1; i++) {
    const [x, y] = pts[i], [nx, ny] = pts[i + 1];
    d += ` Q${x},${y} ${(x + nx) / 2},${(y + ny) / 2}`;
  }
  const last = pts[pts.length - 1];
  return d + ` L${last[0]},${last[1]}`;
}


// Label metrics: 10.5 px text, about 6 px a character, 13 px tall.
const CH = 6.3, LH = 13;

const overlaps = (a, b) => a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];

// placeLabel finds where an edge label collides with no node, cluster
// title or label already placed: points along the edge (half way first,
// then spreading out), right of the line, then left of it, then above and
// below; the least-colliding candidate when every one collides. The chosen
// box is added to placed. Returns the text's [x, baseline y].
function placeLabel(pts, self, text, boxes, placed) {
  const w = text.length * CH + 4, cands = [];
  const spots = self ? [[pts[1][0] + 4, (pts[1][1] + pts[2][1]) / 2]] : [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8, 0.12, 0.88, 0.05, 0.95].map((t) => along(pts, t));
  const offsets = [[6, 4], [-w - 6, 4], [-w / 2, -6], [-w / 2, LH + 4], [6, -LH + 2], [6, LH + 2], [-w - 6, -LH + 2], [-w - 6, LH + 2]];
  // Last resorts: further up and down from the middle.
  for (let k = 2; k <= 6; k++) offsets.push([6, 4 + k * LH], [6, 4 - k * LH], [-w - 6, 4 + k * LH], [-w - 6, 4 - k * LH]);
  for (const [dx, dy] of offsets) for (const [x, y] of spots) cands.push([x + dx, y + dy]);
  let best = null, bestHits = Infinity;
  for (const [x, y] of cands) {
    const box = [x - 1, y - LH + 2, x + w, y + 3];
    let hits = 0;
    for (const b of boxes) if (overlaps(box, b)) hits += 4;
    for (const b of placed) if (overlaps(box, b)) hits += 3;
    if (hits < bestHits) { best = [x, y, box]; bestHits = hits; if (!hits) break; }
  }
  placed.push(best[2]);
  return [Math.round(best[0] * 10) / 10, Math.round(best[1] * 10) / 10];
}

// along is the point at fraction t of a polyline's length.
function along(pts, t) {
  let len = 0;
  const seg = [];
  for (let i = 1; i < pts.length; i++) { const l = Math.hypot(pts[i][0] - pts[i - 1][0], pts[i][1] - pts[i - 1][1]); seg.push(l); len += l; }
  let d = len * t;
  for (let i = 1; i < pts.length; i++) {
    if (d <= seg[i - 1]) {
      const f = seg[i - 1] ? d / seg[i - 1] : 0;
      return [pts[i - 1][0] + (pts[i][0] - pts[i - 1][0]) * f, pts[i - 1][1] + (pts[i][1] - pts[i - 1][1]) * f];
    }
    d -= seg[i - 1];
  }
  return pts[pts.length - 1];
}

// subAgentClusters frames the states of each sub-agent depth (hop > 0):
// the box around them, labelled with the sub-agent tools that called them
// (the parent's "agent" states).
function subAgentClusters(g) {
  const byHop = new Map();
  for (const nd of g.nodes) if (nd.hop > 0) (byHop.get(nd.hop) || byHop.set(nd.hop, []).get(nd.hop)).push(nd);
  const callers = [...new Set(g.nodes.filter((nd) => nd.kind === 'agent').map((nd) => nd.label))];
  const out = [];
  for (const [hop, list] of byHop) {
    const x0 = Math.max(0, Math.min(...list.map((n) => n.x)) - 14), y0 = Math.max(0, Math.min(...list.map((n) => n.y)) - 26);
    const x1 = Math.max(...list.map((n) => n.x + n.w)) + 14, y1 = Math.max(...list.map((n) => n.y + n.h)) + 12;
    const name = hop === 1 && callers.length ? callers.slice(0, 3).join(', ') : 'depth ' + hop;
    out.push({ hop, x: x0, y: y0, w: x1 - x0, h: y1 - y0, label: `sub-agent: ${clip(name, 40)} (${list.length} state${list.length === 1 ? '' : 's'})` });
  }
  return out;
}

// sampleLink links to a step of a sample, named by its session (when the
// list spans sessions) and sequence; the session id shows on hover.
function sampleLink(s, named) {
  const a = h('a', { href: route(['s', s.session_id, String(s.sequence)]), title: s.session_id, text: '#' + s.sequence });
  if (named) sessionOf(s.session_id).then((x) => { if (x) a.textContent = sessionName(x).replace(/`/g, '') + ' #' + s.sequence; });
  return a;
}
