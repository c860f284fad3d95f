// DOM helpers. Everything that comes from the API is put in the page as
// text (text nodes, textContent, attribute values): never as HTML.

// h creates an element. attrs: class, text, dataset, style (object), on<Event>
// handlers, boolean and string attributes. Children: nodes, strings (as
// text), arrays, null/undefined/false (skipped).
export function h(tag, attrs, ...children) {
  const svg = tag.startsWith('svg:');
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4)) : document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
      else if (k === 'text') el.textContent = String(v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2).toLowerCase(), v);
      else if (k === 'href') el.setAttribute('href', safeHref(v));
      else if (v === true) el.setAttribute(k, '');
      else el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// safeHref allows only in-app hash routes and blob: object URLs.
function safeHref(v) {
  const s = String(v);
  return s.startsWith('#') || s.startsWith('blob:') ? s : '#';
}

// clear removes every child of el and appends the given ones.
export function clear(el, ...children) {
  while (el.firstChild) el.removeChild(el.firstChild);
  append(el, children);
  return el;
}

// route builds a hash route from path segments (each encoded) and query.
export function route(segments, query) {
  let s = '#/' + segments.map(encodeURIComponent).join('/');
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
    const qs = q.toString();
    if (qs) s += '?' + qs;
  }
  return s;
}

const nf = new Intl.NumberFormat();

// fmtInt formats an integer with separators.
export function fmtInt(n) { return n === undefined || n === null ? '—' : nf.format(n); }

// fmtTokens formats a token count compactly (12.3k).
export function fmtTokens(n) {
  if (!n) return '0';
  if (n < 1000) return String(n);
  if (n < 1e6) return (n / 1e3).toFixed(n < 1e4 ? 1 : 0) + 'k';
  return (n / 1e6).toFixed(1) + 'M';
}

// fmtCost formats US dollars.
export function fmtCost(usd) {
  if (!usd) return '$0';
  if (usd < 0.01) return '$' + usd.toFixed(4);
  if (usd < 10) return '$' + usd.toFixed(3);
  return '$' + usd.toFixed(2);
}

// fmtMS formats a duration in milliseconds.
// fmtBytes prints a byte count in B, KiB, MiB or GiB.
export function fmtBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let v = n || 0;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : String(v)) + ' ' + units[i];
}

// fmtCPU prints a CPU time in milliseconds, in µs below one.
export function fmtCPU(ms) {
  if (ms > 0 && ms < 1) return Math.round(ms * 1000) + 'µs';
  return fmtMS(ms);
}

export function fmtMS(ms) {
  if (ms === undefined || ms === null) return '—';
  if (ms < 1) return ms > 0 ? '<1ms' : '0ms';
  if (ms < 1000) return Math.round(ms) + 'ms';
  if (ms < 60e3) return (ms / 1000).toFixed(ms < 10e3 ? 2 : 1) + 's';
  if (ms < 3600e3) return Math.floor(ms / 60e3) + 'm ' + Math.round((ms % 60e3) / 1000) + 's';
  return Math.floor(ms / 3600e3) + 'h ' + Math.round((ms % 3600e3) / 60e3) + 'm';
}

// fmtPct formats a ratio 0..1 as a percentage.
export function fmtPct(r) { return r ? (r * 100).toFixed(r < 0.1 ? 1 : 0) + '%' : '0%'; }

// fmtTime formats an RFC 3339 time in the local zone.
export function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return isNaN(d) ? '—' : d.toLocaleString();
}

// ago formats how long ago an RFC 3339 time was.
export function ago(iso) {
  if (!iso) return '—';
  const s = (Date.now() - new Date(iso).getTime()) / 1000;
  if (isNaN(s)) return '—';
  if (s < 5) return 'just now';
  if (s < 60) return Math.floor(s) + 's ago';
  if (s < 3600) return Math.floor(s / 60) + 'm ago';
  if (s < 86400) return Math.floor(s / 3600) + 'h ago';
  return Math.floor(s / 86400) + 'd ago';
}

// shortID shortens a UUID for display (the full id goes in a title).
export function shortID(id) { return id ? String(id).slice(-8) : ''; }

// clip shortens text to n characters on one line.
export function clip(s, n) {
  s = String(s ?? '').replace(/\s+/g, ' ').trim();
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

// badge renders a status or kind badge.
export function badge(value, kind = 'status') {
  return h('span', { class: ['badge', kind + '-' + String(value).replace(/[^a-z_-]/gi, '')], text: value });
}

// jsonView renders a JSON value as an indented, highlighted <pre>; each
// token is a text node inside a span.
export function jsonView(value, { limit = 200000 } = {}) {
  const pre = h('pre', { class: 'json', tabindex: '0' });
  let budget = limit;
  const put = (cls, text) => {
    if (budget <= 0) return;
    text = String(text);
    if (text.length > budget) text = text.slice(0, budget) + '… (truncated)';
    budget -= text.length;
    pre.appendChild(cls ? h('span', { class: cls, text }) : document.createTextNode(text));
  };
  const walk = (v, ind) => {
    if (budget <= 0) return;
    if (v === null) return put('j-null', 'null');
    if (Array.isArray(v)) {
      if (!v.length) return put('', '[]');
      put('', '[\n');
      v.forEach((x, i) => { put('', ind + '  '); walk(x, ind + '  '); put('', i < v.length - 1 ? ',\n' : '\n'); });
      return put('', ind + ']');
    }
    switch (typeof v) {
      case 'object': {
        const keys = Object.keys(v);
        if (!keys.length) return put('', '{}');
        put('', '{\n');
        keys.forEach((k, i) => {
          put('', ind + '  '); put('j-key', JSON.stringify(k)); put('', ': ');
          walk(v[k], ind + '  '); put('', i < keys.length - 1 ? ',\n' : '\n');
        });
        return put('', ind + '}');
      }
      case 'string': return put('j-str', JSON.stringify(v));
      case 'number': return put('j-num', String(v));
      case 'boolean': return put('j-bool', String(v));
      default: return put('', String(v));
    }
  };
  walk(value, '');
  return pre;
}

// textBlock renders long text in a <pre> that keeps line breaks, with a
// "show all" button past limit characters.
export function textBlock(text, { limit = 20000, cls = 'text' } = {}) {
  const pre = h('pre', { class: cls, tabindex: '0' });
  const s = String(text ?? '');
  if (s.length <= limit) {
    pre.textContent = s;
    return pre;
  }
  pre.textContent = s.slice(0, limit);
  const more = h('button', { type: 'button', class: 'link', text: `Show all ${fmtInt(s.length)} characters`, onclick: () => { pre.textContent = s; more.remove(); } });
  return h('div', null, pre, more);
}

// toast shows a short message.
export function toast(msg, kind = 'info') {
  const box = document.getElementById('toasts');
  const t = h('div', { class: ['toast', kind], text: msg });
  box.appendChild(t);
  setTimeout(() => t.remove(), kind === 'error' ? 8000 : 4000);
}

// debounce delays fn until ms passed without another call.
export function debounce(fn, ms) {
  let t;
  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
}

// richText renders message text with the two markdown forms models use
// most, as elements (never HTML): ``` fenced blocks become <pre> and
// `inline code` becomes <code>, so no literal backticks are shown. Other
// text stays as it is, line breaks kept.
export function richText(text, { limit = 20000 } = {}) {
  const s = String(text ?? '');
  const box = h('div', { class: 'rich', tabindex: '0' });
  const shown = s.length > limit ? s.slice(0, limit) : s;
  const parts = shown.split(/```[^\n`]*\n?/);
  parts.forEach((part, i) => {
    if (i % 2 === 1) { box.appendChild(h('pre', { class: 'code', text: part.replace(/\n$/, '') })); return; }
    if (part) box.appendChild(inlineCode(part, 'p'));
  });
  if (shown !== s) {
    const more = h('button', { type: 'button', class: 'link', text: `Show all ${fmtInt(s.length)} characters`, onclick: () => { box.replaceWith(richText(s, { limit: Infinity })); } });
    box.appendChild(more);
  }
  return box;
}

// inlineCode renders text with `code` spans as <code> inside a tag.
export function inlineCode(text, tag = 'span', attrs = null) {
  return h(tag, attrs, codeSpans(text));
}

// codeSpans splits text into text nodes and <code> elements for its
// `code` spans (no backticks shown); plain text stays one text node.
export function codeSpans(text) {
  const s = String(text ?? '');
  if (!s.includes('`')) return [s];
  return s.split(/`([^`\n]+)`/).map((t, i) => (i % 2 ? h('code', { text: t }) : t)).filter((x) => x !== '');
}

// installTips shows the full text of a truncated cell (any element with
// data-full, or one whose text overflows) in a tooltip on hover and on
// keyboard focus.
export function installTips() {
  const tip = h('div', { class: 'tip', id: 'tip', role: 'tooltip', hidden: true });
  document.body.appendChild(tip);
  let cur = null;
  const show = (el) => {
    const full = el.dataset.full || el.textContent;
    const clipped = el.scrollWidth > el.clientWidth + 1 || (!!el.dataset.full && el.dataset.full.replace(/`/g, '') !== el.textContent);
    if (!clipped || !full) { hide(); return; }
    cur = el;
    tip.textContent = full.length > 2000 ? full.slice(0, 2000) + '…' : full;
    tip.hidden = false;
    el.setAttribute('aria-describedby', 'tip');
    const r = el.getBoundingClientRect();
    const w = Math.min(480, window.innerWidth - 16);
    tip.style.maxWidth = w + 'px';
    tip.style.left = Math.max(8, Math.min(r.left, window.innerWidth - w - 8)) + 'px';
    const below = r.bottom + 6;
    tip.style.top = (below + 80 < window.innerHeight ? below : Math.max(8, r.top - 6 - tip.offsetHeight)) + 'px';
  };
  const hide = () => { if (!cur) return; cur.removeAttribute('aria-describedby'); cur = null; tip.hidden = true; };
  const target = (ev) => ev.target instanceof Element ? ev.target.closest('[data-full], .trunc') : null;
  document.addEventListener('mouseover', (ev) => { const el = target(ev); if (el) show(el); else if (cur) hide(); });
  document.addEventListener('focusin', (ev) => { const el = target(ev) || (ev.target instanceof Element ? ev.target.querySelector?.(':scope > .trunc, :scope > [data-full]') : null); if (el) show(el); else hide(); });
  document.addEventListener('focusout', hide);
  document.addEventListener('scroll', hide, true);
  document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') hide(); });
}

// downState renders "the server is not answering" (or another failure)
// plainly, with a Retry button that calls retry.
export function downState(err, retry, what = 'this page') {
  const offline = err && err.status === 0;
  return h('div', { class: 'empty down', role: 'alert' },
    h('h2', { text: offline ? 'The Stepwise server is not answering' : 'Could not load ' + what }),
    offline ? inlineCode('Check that `stepwise serve` is still running and reachable, then retry.', 'p') : h('p', { class: 'error', text: err?.message || 'Unknown error' }),
    h('button', { type: 'button', class: 'primary', 'data-action': 'retry-load', text: 'Retry', onclick: retry }));
}
