// The time view of a session: a waterfall with one bar per step on a
// shared time axis, nested by run and sub-agent (indented by hop, a rule
// where a run starts), showing model time, first-token latency, tool time,
// waits for a person and the back-off before a retried attempt. It is the
// timeline's windowed scroller with another row: only the rows in view
// exist, and it shares the timeline's step chunks, so a 10,000-step
// session stays smooth.

import { api } from './api.js';
import { fmtMS, h } from './dom.js';
import { durationMS, Timeline } from './timeline.js';

export const WROW = 24;
const enc = encodeURIComponent;

const t = (iso) => (iso ? new Date(iso).getTime() : NaN);

// span is a step's [start, end] in ms since the epoch.
export function spanOf(s) {
  const m = s.metrics || {};
  const d = durationMS(s) || 0;
  let end = t(m.finished_at);
  let start = t(m.started_at);
  if (isNaN(end)) end = t(s.created_at);
  if (isNaN(start)) start = end - d;
  if (isNaN(end)) end = start + d;
  return [start, Math.max(start, end)];
}

export class Waterfall extends Timeline {
  constructor(sessionID, count, opts) {
    super(sessionID, count, { ...opts, elementID: 'waterfall', label: 'Steps on a time axis', rowHeight: WROW });
    this.el.classList.add('wf');
    this.t0 = NaN; this.t1 = NaN;
    this.seen = -1;
    this.axis = h('div', { class: 'wf-axis', 'aria-hidden': 'true' });
  }

  put(s) { super.put(s); this.widen([s]); }

  // range reads the first and last steps to set the shared axis.
  async range() {
    if (!this.count) return;
    const [a, b] = await Promise.all([this.ensure(1), api(`/v1/sessions/${enc(this.id)}/steps?start_seq=${this.count}&end_seq=${this.count}`).then((r) => r.steps[0])]);
    this.widen([a, b]);
  }

  render() {
    if (this.fit) this.fitToView();
    else {
      // Chunks loaded by either view widen the axis first.
      let n = 0;
      for (const c of this.chunks.values()) if (Array.isArray(c)) n++;
      if (n !== this.seen) { this.seen = n; this.inRender = true; this.widen(); this.inRender = false; }
    }
    super.render();
  }

  // setFit switches the axis between the whole session and the steps in
  // view (a zoom that follows the scroll).
  setFit(on) {
    this.fit = on;
    if (!on) { this.t0 = this.t1 = NaN; this.seen = -1; this.range().catch(() => {}); }
    for (const el of this.rows.values()) el.remove();
    this.rows.clear();
    this.schedule();
  }

  fitToView() {
    const R = this.rowH, top = this.el.scrollTop, height = this.el.clientHeight || 600;
    const first = Math.max(1, Math.floor(top / R) + 1), last = Math.min(this.count, Math.ceil((top + height) / R));
    let a = NaN, b = NaN;
    for (let q = first; q <= last; q++) {
      const s = this.step(q);
      if (!s) continue;
      const [x, y] = spanOf(s);
      if (!(x >= a)) a = x;
      if (!(y <= b)) b = y;
    }
    if (isNaN(a) || (a === this.t0 && b === this.t1)) return;
    this.t0 = a; this.t1 = b;
    for (const el of this.rows.values()) el.remove();
    this.rows.clear();
    this.drawAxis();
  }

  take([s, e]) {
    if (!isNaN(s) && !(s >= this.t0)) this.t0 = s;
    if (!isNaN(e) && !(e <= this.t1)) this.t1 = e;
  }

  // widen grows the axis to the loaded steps; rows are redrawn when it
  // changed.
  widen(extra = []) {
    const before = [this.t0, this.t1].join();
    for (const s of extra) if (s) this.take(spanOf(s));
    for (const c of this.chunks.values()) if (Array.isArray(c)) for (const s of c) if (s) this.take(spanOf(s));
    if ([this.t0, this.t1].join() !== before) {
      for (const el of this.rows.values()) el.remove();
      this.rows.clear();
      this.drawAxis();
      if (!this.inRender) this.render(); // now: no frame without rows
    }
  }

  drawAxis() {
    const span = this.t1 - this.t0;
    this.axis.replaceChildren(...[0, 0.25, 0.5, 0.75, 1].map((f) => h('span', { class: 'wf-tick', style: { left: `calc(${f * 100}% - ${f * 60}px)` }, text: isNaN(span) ? '' : fmtMS(span * f) })));
  }

  pct(ms) {
    const span = this.t1 - this.t0;
    return span > 0 ? Math.max(0, Math.min(100, ((ms - this.t0) / span) * 100)) : 0;
  }

  row(s) {
    const [start, end] = spanOf(s);
    const m = s.metrics || {};
    // The recorded duration (microseconds) wins over the timestamps, which
    // have millisecond precision: a sub-millisecond step is not 0 ms.
    const dur = durationMS(s);
    const d = dur ?? end - start;
    const prev = this.step(s.sequence - 1);
    const hop = Math.min(s.hop || 0, 8);
    const left = this.pct(start), width = Math.max(this.pct(end) - left, 0.12);
    const segs = [];
    let what = s.kind;
    if (s.kind === 'llm') {
      const ft = m.first_token_latency_us ? m.first_token_latency_us / 1000 : 0;
      if (ft > 0 && d > 0) segs.push(h('span', { class: 'wf-seg seg-ttft', style: { width: Math.min(100, (ft / d) * 100) + '%' } }));
      segs.push(h('span', { class: 'wf-seg seg-model' }));
      what = `model ${fmtMS(d)}` + (ft ? ` · first token ${fmtMS(ft)}` : '');
    } else if (s.kind === 'tool') { segs.push(h('span', { class: 'wf-seg seg-tool' })); what = `tool ${s.tool_name || s.name} ${fmtMS(d)}`; }
    else if (s.kind === 'agent') { segs.push(h('span', { class: 'wf-seg seg-agent' })); what = `sub-agent ${s.tool_name || s.name} ${fmtMS(d)}`; }
    else if (s.kind === 'input') { segs.push(h('span', { class: 'wf-seg seg-wait' })); what = `waiting for a person ${fmtMS(d)}`; }
    else if (s.kind === 'error') { segs.push(h('span', { class: 'wf-seg seg-error' })); what = `failed attempt ${fmtMS(d)}`; }
    else { segs.push(h('span', { class: 'wf-seg seg-other' })); what = `${s.kind} ${fmtMS(d)}`; }
    const parts = [];
    // Back-off: the gap between a failed attempt and the step retrying it.
    if (prev && prev.kind === 'error' && prev.error?.recoverable) {
      const [, pe] = spanOf(prev);
      if (start > pe) {
        const bl = this.pct(pe);
        parts.push(h('span', { class: 'wf-backoff', style: { left: bl + '%', width: Math.max(left - bl, 0.12) + '%' } }));
        what += ` · back-off ${fmtMS(start - pe)} after the failed attempt`;
      }
    }
    parts.push(h('span', { class: ['wf-bar', 'wk-' + s.kind], style: { left: left + '%', width: width + '%' } }, segs));
    const newRun = prev && prev.run_id !== s.run_id;
    const cls = ['tl-row', 'wf-row', 'rk-' + s.kind, s.sequence === this.selected ? 'sel' : '', newRun ? 'wf-run-start' : ''];
    return h('div', { class: cls, id: 'wstep-' + s.sequence, role: 'option', 'aria-selected': s.sequence === this.selected ? 'true' : 'false',
      dataset: { seq: s.sequence, loaded: '1', kind: s.kind, hop: String(hop) }, style: { top: (s.sequence - 1) * WROW + 'px' } },
      h('span', { class: 'seq', text: s.sequence }),
      h('span', { class: 'wf-name', style: { paddingLeft: hop * 12 + 'px' } }, hop ? h('span', { class: 'muted', text: '↳ ' }) : null, h('span', { class: 'kind k-' + s.kind, text: s.kind }), ' ', s.tool_name || s.name || ''),
      h('span', { class: 'wf-track trunc', dataset: { full: `#${s.sequence} ${what}` } }, parts),
      h('span', { class: 'num dur', text: dur !== null || d > 0 ? fmtMS(d) : '' }));
  }
}

// legend explains the waterfall's colours.
export function waterfallLegend() {
  return h('div', { class: 'legend wf-legend', 'aria-label': 'Legend' },
    [['seg-ttft', 'first-token latency'], ['seg-model', 'model time'], ['seg-tool', 'tool time'], ['seg-agent', 'sub-agent'], ['seg-wait', 'waiting for a person'], ['seg-error', 'failed attempt'], ['wf-backoff', 'retry back-off']]
      .map(([c, t]) => h('span', { class: 'wf-key' }, h('i', { class: c }), t)));
}
