// The windowed step timeline: a scroller as tall as every step, and rows
// only for the steps in view. Steps are fetched by sequence range in
// chunks when they come into view, so a 10,000-step session opens with one
// small request and stays fast.

import { api } from './api.js';
import { clear, clip, codeSpans, fmtCost, fmtMS, fmtTokens, h } from './dom.js';

export const ROW = 30; // px, fixed row height
const CHUNK = 200;
const OVERSCAN = 12;

// summaryOf is the one-line description of a step.
export function summaryOf(s) {
  if (s.kind === 'tool' || s.kind === 'agent') return (s.tool_name || s.name) + (s.content ? ' → ' + clip(s.content, 140) : '');
  if (s.tool_calls?.length) return (s.content ? clip(s.content, 60) + ' · ' : '') + 'calls ' + s.tool_calls.map((c) => c.name).join(', ');
  if (s.kind === 'input') {
    const p = s.inputs?.approval ? 'approve ' + s.inputs.approval.name : s.inputs?.prompt || 'input';
    return clip(p, 100) + (s.content ? ' → ' + clip(s.content, 60) : '');
  }
  if (s.kind === 'decision') return 'choose ' + (s.outputs?.choice ?? '?') + (s.inputs?.purpose ? ' · ' + clip(s.inputs.purpose, 80) : '');
  if (s.kind === 'error') return (s.error?.code ? s.error.code + ': ' : '') + clip(s.error?.message || 'error', 140);
  if (s.annotations?.action) return clip(s.annotations.action, 140);
  return clip(s.content || s.reasoning || s.annotations?.state || '', 160);
}

// durationMS is a step's duration in milliseconds: its recorded duration,
// else the time from its start to its end; null when it has neither.
export function durationMS(s) {
  const m = s.metrics || {};
  if (m.duration_us) return m.duration_us / 1000;
  if (m.started_at && m.finished_at) {
    const d = new Date(m.finished_at) - new Date(m.started_at);
    if (d > 0) return d;
  }
  return null;
}

// Timeline renders into a scroll container. onSelect(seq) is called when
// the selection changes.
export class Timeline {
  constructor(sessionID, count, { onSelect, forkSequence = 0, chunks = null, elementID = 'timeline', label = 'Steps', rowHeight = ROW }) {
    this.id = sessionID;
    this.count = count;
    this.forkSequence = forkSequence;
    this.onSelect = onSelect;
    this.rowH = rowHeight;
    this.chunks = chunks || new Map(); // chunk index → array of steps | Promise (shared by the views of a session)
    this.selected = 0;
    this.live = new Map(); // run id → {name, text}
    this.follow = false;
    this.spacer = h('div', { class: 'tl-spacer' });
    this.el = h('div', { class: 'timeline', id: elementID, tabindex: '0', role: 'listbox', 'aria-label': label, 'aria-activedescendant': '' }, this.spacer);
    this.el.addEventListener('scroll', () => this.schedule(), { passive: true });
    this.el.addEventListener('click', (ev) => {
      const row = ev.target.closest?.('[data-seq]');
      if (row) this.select(+row.dataset.seq, { scroll: false });
    });
    this.raf = 0;
    this.rows = new Map(); // seq → element
    this.resize();
  }

  resize() { this.spacer.style.height = (this.count + this.live.size) * this.rowH + 'px'; }

  step(seq) {
    const c = this.chunks.get(Math.floor((seq - 1) / CHUNK));
    return Array.isArray(c) ? c[(seq - 1) % CHUNK] : undefined;
  }

  // ensure fetches the chunk holding seq; it resolves to the step.
  async ensure(seq) {
    const ci = Math.floor((seq - 1) / CHUNK);
    let c = this.chunks.get(ci);
    if (Array.isArray(c) && !c[(seq - 1) % CHUNK] && seq > c.upTo) c = null; // fetched before this step existed
    if (!c) {
      const start = ci * CHUNK + 1, end = Math.min(this.count, start + CHUNK - 1);
      c = api(`/v1/sessions/${encodeURIComponent(this.id)}/steps?start_seq=${start}&end_seq=${end}`).then((r) => {
        const arr = new Array(CHUNK);
        arr.upTo = end;
        for (const s of r.steps) if (s.sequence >= start && s.sequence < start + CHUNK) arr[s.sequence - start] = s;
        this.chunks.set(ci, arr);
        this.schedule();
        return arr;
      }, (e) => { this.chunks.delete(ci); throw e; });
      this.chunks.set(ci, c);
    }
    const arr = await c;
    return arr[(seq - 1) % CHUNK];
  }

  // put stores a step that arrived live (new or updated).
  put(s) {
    const ci = Math.floor((s.sequence - 1) / CHUNK);
    const c = this.chunks.get(ci);
    if (Array.isArray(c)) c[(s.sequence - 1) % CHUNK] = s;
    else if (c) c.then(() => this.put(s), () => {});
    // An unloaded chunk is fetched when it comes into view.
    this.rows.get(s.sequence)?.remove();
    this.rows.delete(s.sequence);
    if (s.sequence > this.count) { this.count = s.sequence; this.resize(); }
    this.schedule();
    if (this.follow) this.scrollToEnd();
  }

  setLive(runID, v) {
    if (v) this.live.set(runID, v); else this.live.delete(runID);
    this.resize();
    this.renderLive();
  }

  schedule() {
    if (this.raf) return;
    this.raf = requestAnimationFrame(() => { this.raf = 0; this.render(); });
  }

  render() {
    const top = this.el.scrollTop, height = this.el.clientHeight || 600;
    const R = this.rowH;
    const first = Math.max(1, Math.floor(top / R) - OVERSCAN + 1);
    const last = Math.min(this.count, Math.ceil((top + height) / R) + OVERSCAN);
    for (const [seq, el] of this.rows) if (seq < first || seq > last) { el.remove(); this.rows.delete(seq); }
    for (let seq = first; seq <= last; seq++) {
      const s = this.step(seq);
      let el = this.rows.get(seq);
      if (el && (el.dataset.loaded === '1') === !!s) continue;
      if (!s) this.ensure(seq).then(() => this.schedule(), () => {});
      const next = s ? this.row(s) : h('div', { class: 'tl-row placeholder', dataset: { seq }, style: { top: (seq - 1) * R + 'px' } }, h('span', { class: 'seq', text: seq }), h('span', { class: 'shimmer' }));
      if (el) el.replaceWith(next); else this.spacer.appendChild(next);
      this.rows.set(seq, next);
    }
    this.renderLive();
    if (!window.__stepwiseFirstRender && this.rows.size && [...this.rows.values()].some((r) => r.dataset.loaded === '1')) {
      window.__stepwiseFirstRender = performance.now();
    }
  }

  row(s) {
    const m = s.metrics || {};
    const cls = ['tl-row', 'rk-' + s.kind, 'st-' + s.status, s.sequence === this.selected ? 'sel' : '', s.sequence === this.forkSequence ? 'fork-edge' : ''];
    const hop = Math.min(s.hop || 0, 8);
    return h('div', { class: cls, id: 'step-' + s.sequence, role: 'option', 'aria-selected': s.sequence === this.selected ? 'true' : 'false',
      dataset: { seq: s.sequence, loaded: '1', kind: s.kind }, style: { top: (s.sequence - 1) * ROW + 'px' } },
      h('span', { class: 'seq', text: s.sequence }),
      h('span', { class: 'indent', style: { width: hop * 14 + 'px' } }, Array.from({ length: hop }, () => h('i'))),
      h('span', { class: 'kind k-' + s.kind, text: s.kind }),
      h('span', { class: 'name', text: s.name || '' }),
      h('span', { class: 'sum trunc', dataset: s.content && s.content.length > 60 ? { full: s.content.slice(0, 2000) } : undefined }, codeSpans(summaryOf(s))),
      h('span', { class: 'st', title: s.replay ? 'replayed: ' + s.replay : s.status, text: s.status === 'completed' ? (s.replay || '') : s.status }),
      h('span', { class: 'num dur', text: durationMS(s) !== null ? fmtMS(durationMS(s)) : '' }),
      h('span', { class: 'num tok', text: m.input_tokens || m.output_tokens ? fmtTokens((m.input_tokens || 0) + (m.output_tokens || 0)) : '' }),
      h('span', { class: 'num cost', text: m.cost ? fmtCost(m.cost) : '' }));
  }

  renderLive() {
    for (const el of this.spacer.querySelectorAll('.tl-live')) el.remove();
    let i = 0;
    for (const [runID, v] of this.live) {
      this.spacer.appendChild(h('div', { class: 'tl-row tl-live', dataset: { run: runID }, style: { top: (this.count + i) * this.rowH + 'px' } },
        h('span', { class: 'seq', text: '•' }), h('span', { class: 'kind k-live', text: 'live' }), h('span', { class: 'name', text: v.name || '' }),
        h('span', { class: 'sum', text: clip(v.text || 'working…', 200) })));
      i++;
    }
  }

  select(seq, { scroll = true } = {}) {
    seq = Math.max(1, Math.min(this.count, seq));
    if (!this.count) return;
    const prev = this.rows.get(this.selected);
    prev?.classList.remove('sel');
    prev?.setAttribute('aria-selected', 'false');
    this.selected = seq;
    const el = this.rows.get(seq);
    el?.classList.add('sel');
    el?.setAttribute('aria-selected', 'true');
    this.el.setAttribute('aria-activedescendant', 'step-' + seq);
    if (scroll) this.scrollTo(seq);
    this.onSelect?.(seq);
  }

  scrollTo(seq) {
    const R = this.rowH, y = (seq - 1) * R, top = this.el.scrollTop, hgt = this.el.clientHeight;
    if (y < top) this.el.scrollTop = y;
    else if (y + R > top + hgt) this.el.scrollTop = y + R - hgt;
    this.schedule();
  }

  scrollToEnd() { this.el.scrollTop = this.el.scrollHeight; this.schedule(); }

  destroy() { cancelAnimationFrame(this.raf); clear(this.el); this.destroyed = true; }
}
