// The detail of one step: message, reasoning, tool calls and results as
// formatted JSON, metrics, error, annotations, evals, attachments, the
// events inside the step, and the actions on it. Evals, attachments and
// events come from endpoints this server may not have yet; their sections
// appear only when it answers them.

import { api, optional } from './api.js';
import { badge, clear, fmtBytes, fmtCost, fmtCPU, fmtInt, fmtMS, fmtTime, h, jsonView, richText, textBlock, toast } from './dom.js';
import { requestSection } from './request.js';
import { copyID, needsAgent } from './names.js';
import { forkAt, inputCard, retryFrom, scoreStep } from './actions.js';

const enc = encodeURIComponent;
const features = {}; // endpoint family → false once the server says it has none

function section(title, ...body) {
  return h('section', { class: 'd-sec' }, h('h3', { text: title }), body);
}

function kv(rows) {
  return h('dl', { class: 'kv' }, rows.filter(([, v]) => v !== undefined && v !== null && v !== '' && v !== false).map(([k, v]) => [h('dt', { text: k }), h('dd', null, v instanceof Node ? v : String(v))]));
}

// renderDetail fills el with the detail of step s of session sessionID.
export function renderDetail(el, sessionID, s, { onChanged, runActive = () => true, agent = '' } = {}) {
  delete el.dataset.evals;
  if (!s) { clear(el, h('p', { class: 'muted empty', text: 'Select a step (j / k).' })); return; }
  const m = s.metrics || {};
  const retry = h('button', { type: 'button', 'data-action': 'retry', text: 'Retry from here', onclick: () => retryFrom(sessionID, s) });
  const agentNote = h('p', { class: 'muted small agent-note', role: 'note', hidden: true });
  needsAgent(agent, [retry], agentNote);
  const actions = h('div', { class: 'd-actions' },
    h('button', { type: 'button', 'data-action': 'fork', text: 'Fork here', title: 'Fork the session at this step', onclick: () => forkAt(sessionID, s) }),
    retry,
    h('button', { type: 'button', 'data-action': 'copy', text: 'Copy JSON', onclick: () => navigator.clipboard?.writeText(JSON.stringify(s, null, 2)).then(() => toast('Copied.'), () => toast('Copy failed', 'error')) }));
  const parts = [
    h('header', { class: 'd-head' },
      h('div', null, h('span', { class: 'seqbig', text: '#' + s.sequence }), badge(s.kind, 'kind'), h('strong', { class: 'd-name', text: s.name || '' }), badge(s.status)),
      h('div', { class: 'muted small ids' }, h('span', { title: s.id }, 'step id'), copyID(s.id, 'step id'),
        s.run_id ? [' · ', h('span', { title: s.run_id }, s.hop ? 'sub-agent run' : 'run'), copyID(s.run_id, 'run id')] : '', s.hop ? ' · hop ' + s.hop : '',
        s.session_id !== sessionID ? [' · inherited from ', h('a', { href: '#/s/' + enc(s.session_id) + '/' + s.sequence, text: 'parent session' })] : '',
        // A step or tool call served by a worker process (docs/workers.md).
        typeof s.metadata?.worker === 'string' && s.metadata.worker ? [' · served by worker ', h('code', { class: 'worker', title: 'worker id', text: s.metadata.worker })] : ''),
      actions, agentNote),
  ];
  // A request is answerable only while its run still waits for it: a
  // cancelled or finished run never shows a form.
  if (s.kind === 'input' && s.status === 'waiting' && !runActive(s.run_id)) {
    parts.push(h('p', { class: 'muted stale-request', text: 'This request is no longer answerable: its run has ended.' }));
  } else if (s.kind === 'input' && s.status === 'waiting') {
    parts.push(inputCard({ request_id: s.id, run_id: s.run_id, session_id: s.session_id, request: s.inputs }, { onDone: onChanged }));
  }
  if (s.content) parts.push(section(s.role ? `Message (${s.role})` : 'Content', s.role === 'assistant' || s.role === 'user' ? richText(s.content) : textBlock(s.content)));
  if (s.kind === 'llm') parts.push(requestSection(sessionID, s));
  if (s.reasoning) parts.push(h('details', { class: 'd-sec', open: !s.content }, h('summary', { text: 'Reasoning' }), textBlock(s.reasoning)));
  if (s.tool_calls?.length) {
    parts.push(section('Tool calls', s.tool_calls.map((c) => h('div', { class: 'call' }, h('code', { class: 'tool', text: c.name }), h('span', { class: 'muted small', text: ' ' + (c.id || '') }), jsonView(c.arguments ?? null)))));
  }
  if (s.tool_name || s.tool_call_id) parts.push(section('Tool', kv([['name', h('code', { class: 'tool', text: s.tool_name || '' })], ['call id', s.tool_call_id]])));
  if (s.error) {
    const e = s.error;
    parts.push(h('section', { class: 'd-sec err' }, h('h3', { text: 'Error' }), kv([['message', e.message], ['cause', e.cause], ['class', e.class], ['code', e.code], ['attempt', e.attempt], ['recoverable', e.recoverable ? 'yes' : 'no']])));
  }
  if (s.inputs !== undefined) parts.push(section(s.kind === 'tool' ? 'Arguments' : s.kind === 'input' ? 'Request' : 'Inputs', jsonView(s.inputs)));
  if (s.outputs !== undefined) parts.push(section(s.kind === 'tool' ? 'Result' : s.kind === 'input' ? 'Answer' : 'Outputs', jsonView(elideBlobs(s.outputs))));
  if (s.state_patch !== undefined) parts.push(section('State patch', jsonView(s.state_patch)));
  const a = s.annotations;
  if (a) parts.push(section('Annotations', kv([['state', a.state], ['state summary', a.state_summary], ['goal', a.goal], ['goal summary', a.goal_summary], ['action', a.action], ['action summary', a.action_summary]])));
  parts.push(section('Metrics', kv([
    ['duration', m.duration_us !== undefined ? fmtMS(m.duration_us / 1000) : undefined],
    ['first token', m.first_token_latency_us ? fmtMS(m.first_token_latency_us / 1000) : undefined],
    ['input tokens', m.input_tokens ? fmtInt(m.input_tokens) : undefined], ['output tokens', m.output_tokens ? fmtInt(m.output_tokens) : undefined],
    ['cached tokens', m.cached_tokens ? fmtInt(m.cached_tokens) : undefined], ['reasoning tokens', m.reasoning_tokens ? fmtInt(m.reasoning_tokens) : undefined],
    ['cost', m.cost ? fmtCost(m.cost) : undefined], ['model', m.model], ['provider', m.provider], ['attempt', m.attempt],
    ['CPU time', m.cpu_time_ns ? fmtCPU(m.cpu_time_ns / 1e6) : undefined],
    ['allocated', m.alloc_bytes ? `${fmtBytes(m.alloc_bytes)} in ${fmtInt(m.alloc_objects || 0)} objects` : (m.cpu_time_ns ? 'none counted (the runtime counts heap allocation in batches)' : undefined)],
    ['overlapping steps', m.cpu_time_ns || m.alloc_bytes ? `${fmtInt(m.overlapping_steps || 0)}${m.overlapping_steps ? ' (CPU and allocation shared with them)' : ''}` : undefined],
    ['started', m.started_at ? fmtTime(m.started_at) : undefined], ['finished', m.finished_at ? fmtTime(m.finished_at) : undefined],
    ['committed', fmtTime(s.created_at)], ['replay', s.replay], ['fingerprint', s.fingerprint],
  ])));
  const evals = h('div'), atts = h('div'), events = h('div');
  parts.push(evals, atts, events);
  if (s.metadata) {
    const meta = { ...s.metadata };
    if (Array.isArray(meta.attachments)) delete meta.attachments;
    if (Object.keys(meta).length) parts.push(section('Metadata', jsonView(meta)));
  }
  parts.push(h('details', { class: 'd-sec' }, h('summary', { text: 'Raw step JSON' }), jsonView(s)));
  clear(el, parts);
  loadEvals(evals, s, actions, el);
  loadAttachments(atts, s);
  loadEvents(events, s);
}

const list = (r, key) => (Array.isArray(r) ? r : r?.[key] || r?.items || []);

async function loadEvals(el, s, actions, root) {
  const mark = (v) => { if (root) root.dataset.evals = v; };
  if (features.evals === false) { mark('absent'); return; }
  try {
    const r = await optional(`/v1/steps/${enc(s.id)}/evals`);
    if (r === undefined) { features.evals = false; mark('absent'); return; }
    features.evals = true;
    mark('present');
    const rows = list(r, 'evals');
    actions.appendChild(h('button', { type: 'button', 'data-action': 'score', text: 'Score', onclick: async () => { if (await scoreStep(s)) { toast('Score saved.'); loadEvals(clear(el), s, h('div'), root); } } }));
    if (!rows.length) return;
    clear(el, section('Evals', h('table', { class: 'grid compact' },
      h('thead', null, h('tr', null, ['Name', 'Score', 'Label', 'Source', 'Description'].map((t) => h('th', { scope: 'col', text: t })))),
      h('tbody', null, rows.map((e) => h('tr', null, h('td', { text: e.name || '' }), h('td', { class: 'num', text: typeof e.score === 'number' ? e.score.toFixed(2) : '' }),
        h('td', { text: e.label || '' }), h('td', { text: e.source || '' }), h('td', { text: e.description || '' })))))));
  } catch { /* the section stays empty */ }
}

async function loadAttachments(el, s) {
  let rows = Array.isArray(s.metadata?.attachments) ? s.metadata.attachments.filter((x) => x && typeof x === 'object') : [];
  if (features.attachments !== false) {
    try {
      const r = await optional(`/v1/steps/${enc(s.id)}/attachments`);
      if (r === undefined) features.attachments = false; else rows = rows.concat(list(r, 'attachments'));
    } catch { /* keep metadata ones */ }
  }
  if (!rows.length) return;
  clear(el, section('Attachments', h('ul', { class: 'attachments' }, rows.map((x) => {
    const li = h('li', { class: 'attachment' }, h('span', { class: 'att-name', text: String(x.name ?? 'attachment') }),
      h('span', { class: 'muted small', text: ' ' + [x.kind, x.content_type, x.size ? fmtInt(x.size) + ' B' : ''].filter(Boolean).join(' · ') }));
    const src = attachmentURL(x);
    if (src) {
      const name = String(x.name ?? 'attachment');
      const type = String(x.content_type || '');
      const isImage = /^image\/(png|jpeg|gif|webp)$/.test(type);
      // Fetched with the token and offered from a blob: URL: text, JSON,
      // PDF and images open in a tab (text as plain text, never as a
      // page), and everything downloads under its name.
      const openable = isImage || /^text\/|^application\/(json|pdf)$/.test(type);
      const links = h('span', { class: 'att-links', 'aria-busy': 'true' });
      li.appendChild(links);
      api(src, { raw: true }).then((res) => res.blob()).then((b) => {
        const shown = type.startsWith('text/') || type === 'application/json' ? new Blob([b], { type: 'text/plain;charset=utf-8' }) : b;
        const url = URL.createObjectURL(shown);
        links.removeAttribute('aria-busy');
        links.append(' ', openable ? h('a', { href: url, target: '_blank', rel: 'noopener', 'data-action': 'open-attachment', text: 'Open' }) : null,
          openable ? ' · ' : null, h('a', { href: url, download: name, 'data-action': 'download-attachment', text: 'Download' }));
        if (isImage) li.appendChild(h('a', { href: url, target: '_blank', rel: 'noopener' }, h('img', { src: url, alt: name, loading: 'lazy' })));
      }).catch((e) => { links.removeAttribute('aria-busy'); links.appendChild(h('span', { class: 'error small', text: ' could not fetch: ' + e.message })); });
    }
    return li;
  }))));
}

// attachmentURL is where an attachment's content is served: an API path
// only (never a URL taken from data pointing elsewhere).
function attachmentURL(x) {
  if (typeof x.url === 'string' && x.url.startsWith('/v1/')) return x.url;
  if (typeof x.id === 'string' && x.id) return `/v1/attachments/${enc(x.id)}/content`;
  return '';
}

async function loadEvents(el, s) {
  if (features.events === false) return;
  try {
    const r = await optional(`/v1/steps/${enc(s.id)}/events`);
    if (r === undefined) { features.events = false; return; }
    const rows = list(r, 'events');
    if (!rows.length) return;
    clear(el, section(`Events inside the step (${rows.length})`, rows.map((e) => h('details', { class: 'event' },
      h('summary', null, h('code', { text: e.type || 'event' }), ' ', e.name || '', e.duration ? ' · ' + fmtMS(e.duration / 1e6) : '', e.error ? h('span', { class: 'error', text: ' ' + e.error }) : ''),
      e.payload !== undefined ? jsonView(e.payload) : h('p', { class: 'muted', text: e.blob_hash ? `stored out of line (${fmtInt(e.size)} bytes)` : 'no payload' })))));
  } catch { /* nothing to show */ }
}

// elideBlobs replaces the base64 data of image, audio and blob content
// blocks (an MCP result's, which the step keeps as attachments too) with a
// line saying what it was; the raw step JSON keeps it.
export function elideBlobs(v, depth = 0) {
  if (depth > 32 || v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map((x) => elideBlobs(x, depth + 1));
  const out = {};
  for (const [k, x] of Object.entries(v)) {
    if ((k === 'data' || k === 'blob') && typeof x === 'string' && x.length > 256 && /^[A-Za-z0-9+/=\s]+$/.test(x.slice(0, 4096))) {
      const type = v.mimeType || v.mime_type || v.type || 'binary';
      out[k] = `[${type}, ${Math.floor(x.length * 3 / 4)} bytes of base64: see Attachments]`;
    } else out[k] = elideBlobs(x, depth + 1);
  }
  return out;
}
