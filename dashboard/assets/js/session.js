// A session: header with status and actions, pending inputs, the windowed
// step timeline with the selected step's detail, live updates over SSE
// (resumed from the last event id), and the fork tree.

import { api, stream } from './api.js';
import { ago, badge, clear, codeSpans, downState, fmtCost, fmtInt, fmtMS, fmtTokens, h, route, shortID, toast } from './dom.js';
import { composer } from './composer.js';
import { needsAgent, sessionName } from './names.js';
import { Timeline } from './timeline.js';
import { Waterfall, waterfallLegend } from './waterfall.js';
import { renderDetail } from './detail.js';
import { cancelRun, inputCard, inputsChanged, replay } from './actions.js';
import { forkTree } from './tree.js';

const enc = encodeURIComponent;
// The newest runs the page reads: the header shows the latest turn and the
// input cards need the runs still active, which are the newest (a session
// has one unfinished top-level run at a time, its sub-agent runs come
// after it). A run older than these counts as active (runActive), so no
// card is hidden by the bound; a long session opens without reading its
// every turn.
const RUNS_SHOWN = 100;
const ACTIVE = new Set(['queued', 'running', 'waiting']);

// originOf is the session a fork, retry, replay or edited copy came from.
export function originOf(s) {
  return s ? s.parent_session_id || (s.metadata?.forked_from ? String(s.metadata.forked_from) : '') : '';
}

export function sessionView(main, { id, seq, tab }) {
  let closed = false, es = null, tl = null, wf = null, sess = null, runs = [], resync = false, rowsShown = false;
  const view = () => (tab === 'time' ? wf : tl);
  const title = h('h1', { class: 'title', title: id, text: 'Session' });
  const meta = h('div', { class: 'meta' });
  const status = h('span', { class: 'status-slot' });
  const btns = h('div', { class: 'toolbar' });
  const pending = h('div', { class: 'pending', 'aria-live': 'polite' });
  const conn = document.getElementById('conn');
  const detail = h('aside', { class: 'detail', id: 'detail', 'aria-label': 'Step detail', tabindex: '-1' });
  const tlBox = h('div', { class: 'tl-box' });
  const wfBox = h('div', { class: 'tl-box wf-box' }, h('p', { class: 'loading', text: 'Loading steps…' }));
  // openWaterfall builds the time view once the timeline has the session.
  const openWaterfall = () => {
    if (!tl || wf) { if (wf) requestAnimationFrame(() => wf.schedule()); return; }
    wf = new Waterfall(id, tl.count, { onSelect: showDetail, chunks: tl.chunks, forkSequence: sess.fork_sequence || 0 });
    const fit = h('button', { type: 'button', 'data-action': 'fit-axis', 'aria-pressed': 'false', text: 'Zoom to the steps in view',
      onclick: () => { const on = fit.getAttribute('aria-pressed') !== 'true'; fit.setAttribute('aria-pressed', String(on)); wf.setFit(on); } });
    clear(wfBox, h('div', { class: 'wf-tools' }, waterfallLegend(), fit), h('div', { class: 'wf-head', 'aria-hidden': 'true' }, h('span', { text: '#' }), h('span', { text: 'step' }), wf.axis, h('span', { text: 'time' })), wf.el);
    wf.range().catch(() => {});
    wf.render();
    if (tl.selected) wf.select(tl.selected);
  };
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  const body = h('div', { class: 'session-body' });
  clear(main, h('div', { class: 'page-head' }, h('div', { class: 'crumbs' }, h('a', { href: '#/', text: 'Sessions' }), ' / '), h('div', { class: 'head-row' }, title, status), meta, btns),
    pending, tabs, body, h('div', { class: 'composer-slot' }));
  let box = { update() {}, el: null };

  const compareLink = h('a', { class: 'tab-link', 'data-action': 'compare', href: route(['compare'], { b: id }), text: 'Compare' });
  const setTab = (t) => {
    tab = t;
    clear(tabs,
      [['timeline', 'Timeline'], ['forks', 'Fork tree'], ['time', 'Time']].map(([k, label]) => h('button', { type: 'button', role: 'tab', 'aria-selected': String(k === tab), class: k === tab ? 'on' : '', text: label,
        onclick: () => { history.replaceState(null, '', route(['s', id], k === 'timeline' ? null : { tab: k })); setTab(k); } })),
      h('a', { class: 'tab-link', href: route(['s', id, 'graph']), text: 'Workflow graph' }),
      compareLink);
    if (tab === 'forks') clear(body, forkTree(id));
    else if (tab === 'time') { clear(body, h('div', { class: 'split' }, wfBox, detail)); openWaterfall(); }
    else clear(body, h('div', { class: 'split' }, tlBox, detail));
    if (tab === 'timeline' && tl) requestAnimationFrame(() => tl.schedule());
  };

  const latestRun = () => runs.find((r) => r.hop === 0);
  const runActive = (runID) => { const r = runs.find((x) => x.id === runID); return !r || ACTIVE.has(r.status); };
  box = composer({ sessionID: id, get session() { return sess; }, get run() { return latestRun(); }, onStarted: () => { if (tl) { tl.follow = true; tl.scrollToEnd(); } refresh(); } });
  main.querySelector('.composer-slot').appendChild(box.el);
  let metaSig = '';
  const cancelBtn = h('button', { type: 'button', class: 'danger', 'data-action': 'cancel', text: 'Cancel run', hidden: true,
    onclick: async () => { const r = latestRun(); if (r && await cancelRun(r.id)) refresh(); } });
  const followBtn = h('button', { type: 'button', 'data-action': 'follow', 'aria-pressed': 'false', text: 'Follow', title: 'Follow the live end (f)', onclick: () => toggleFollow() });
  const replayBtn = h('button', { type: 'button', 'data-action': 'replay', text: 'Replay', onclick: () => replay(id) });
  const agentNote = h('span', { class: 'muted small agent-note', role: 'note', hidden: true });
  let agentChecked = false;
  btns.append(cancelBtn, replayBtn, followBtn, agentNote);

  const renderHead = () => {
    if (!sess) return;
    clear(title, codeSpans(sessionName(sess)));
    if (!agentChecked) { agentChecked = true; needsAgent(sess.agent, [replayBtn], agentNote); }
    compareLink.setAttribute('href', route(['compare'], { a: originOf(sess), b: id }));
    compareLink.title = originOf(sess) ? 'Compare with the session it came from' : 'Compare with another session';
    title.title = sess.id;
    const run = latestRun();
    clear(status, badge(run ? run.status : 'idle'));
    const steps = tl ? tl.count : sess.last_sequence;
    const sig = [steps, sess.input_tokens, sess.output_tokens, sess.cost, sess.updated_at, run?.id, run?.status, run?.error?.message].join('|');
    if (sig !== metaSig) {
      metaSig = sig;
      // A fork's tokens, cost and time count its own steps only: say so,
      // and split its step count the same way.
      const inherited = sess.parent_session_id ? Math.min(sess.fork_sequence || 0, steps) : 0;
      const own = inherited ? 'own ' : '';
      clear(meta,
        sess.agent ? [h('a', { href: route(['a', sess.agent]), text: sess.agent }), ' · '] : null,
        h('span', { class: 'm-steps' }, inherited ? `${fmtInt(steps)} steps (${fmtInt(inherited)} inherited + ${fmtInt(steps - inherited)} own)` : fmtInt(steps) + ' steps'), ' · ',
        h('span', { class: 'm-tokens' }, fmtTokens(sess.input_tokens + sess.output_tokens) + ` ${own}tokens`), ' · ',
        h('span', { class: 'm-cost' }, fmtCost(sess.cost) + (inherited ? ' own cost' : '')), ' · ',
        h('span', { class: 'm-time' }, fmtMS(new Date(sess.updated_at) - new Date(sess.created_at)) + (inherited ? ' own time' : '')), ' · updated ', ago(sess.updated_at),
        sess.metadata?.forked_from ? [' · edited copy of ', h('a', { href: route(['s', String(sess.metadata.forked_from)]), dataset: { origin: '1' }, text: 'the original' }),
          sess.metadata.edited_sequence ? ' (step ' + sess.metadata.edited_sequence + ' edited)' : ''] : null,
        sess.parent_session_id ? [' · forked from ', h('a', { href: route(['s', sess.parent_session_id, String(sess.fork_sequence)]), dataset: { origin: '1' }, text: 'the parent' }), ' at #' + sess.fork_sequence] : null,
        run?.error ? [' · ', h('span', { class: 'error', text: run.error.message })] : null);
    }
    // The message box reads the agents and the last step: after the first
    // rows are on screen, so it never delays them.
    if (rowsShown) box.update();
    // The buttons are made once and updated in place, so focus stays put.
    cancelBtn.hidden = !(run && ACTIVE.has(run.status));
    followBtn.setAttribute('aria-pressed', String(!!tl?.follow));
    followBtn.textContent = tl?.follow ? 'Following' : 'Follow';
  };

  const toggleFollow = () => { if (!tl) return; tl.follow = !tl.follow; if (tl.follow) tl.scrollToEnd(); renderHead(); };

  const refreshPending = async () => {
    try {
      const r = await api('/v1/inputs');
      // Only requests of runs still waiting: never one of a cancelled or
      // finished run (re-read the runs first when one is not known yet).
      if (r.inputs.some((p) => p.session_id === id && !runs.some((x) => x.id === p.run_id))) await refresh();
      const mine = r.inputs.filter((p) => p.session_id === id && runActive(p.run_id));
      // Keep the cards already shown (and what is typed in them).
      const shown = new Map([...pending.children].map((c) => [c.dataset.request, c]));
      const want = new Set(mine.map((p) => p.request_id));
      for (const [rid, c] of shown) if (!want.has(rid)) c.remove();
      for (const p of mine) if (!shown.has(p.request_id)) pending.appendChild(inputCard(p, { onDone: () => { refreshPending(); refresh(); } }));
    } catch { /* not fatal */ }
  };

  const refresh = async () => {
    try {
      const [s, r] = await Promise.all([api(`/v1/sessions/${enc(id)}`), api(`/v1/sessions/${enc(id)}/runs?limit=${RUNS_SHOWN}`).catch(() => ({ runs: [] }))]);
      sess = s; runs = r.runs;
      renderHead();
    } catch { /* keep what is shown */ }
  };

  const showDetail = async (n) => {
    if (!tl) return;
    history.replaceState(null, '', route(['s', id, String(n)], tab === 'timeline' ? null : { tab }));
    const s = tl.step(n) || await tl.ensure(n).catch(() => undefined);
    if (closed || view().selected !== n) return;
    if (tab === 'time') tl.selected = n; else if (wf) wf.selected = n;
    renderDetail(detail, id, s, { onChanged: () => { refreshPending(); refresh(); }, runActive, agent: sess?.agent });
  };

  const onEvent = (type, ev, eventID) => {
    // Event ids seen, for tests and debugging: strictly increasing positions.
    if (eventID !== null) (window.__stepwiseEventIDs ||= []).push(type + ' ' + eventID);
    if (!tl || !ev || typeof ev !== 'object') return;
    switch (type) {
      case 'step_started':
        tl.setLive(ev.run_id, { name: ev.step_name, text: '' });
        break;
      case 'step_delta': {
        const cur = tl.live.get(ev.run_id) || { name: ev.step_name, text: '' };
        const d = ev.delta || {};
        cur.text += d.content || d.reasoning || (d.tool_call ? (d.tool_call.name ? ' ' + d.tool_call.name + '(' : '') + (d.tool_call.arguments || '') : '');
        tl.setLive(ev.run_id, cur);
        break;
      }
      case 'step_completed':
        if (ev.step) {
          tl.setLive(ev.run_id, null);
          tl.put(ev.step);
          wf?.put(ev.step);
          if (tl.selected === ev.step.sequence) showDetail(ev.step.sequence);
          if (ev.step.kind === 'input') { refreshPending(); inputsChanged(); }
          if (sess) { sess.last_sequence = Math.max(sess.last_sequence, ev.step.sequence); renderHead(); }
        }
        break;
      case 'run_waiting':
        refreshPending(); inputsChanged(); refresh();
        break;
      case 'run_started':
      case 'run_finished':
      case 'run_cancelled':
        tl.setLive(ev.run_id, null);
        // A request of a run that ended is no longer answerable: re-read
        // the run, drop its cards and redraw an open input step.
        refresh().then(() => { const cur = tl.step(tl.selected); if (cur?.kind === 'input') showDetail(tl.selected); });
        refreshPending(); inputsChanged();
        break;
      case 'error':
        toast('Stream error: ' + (ev.detail || 'unknown'), 'error');
        break;
    }
  };

  const onKey = (ev) => {
    if (!tl || (tab !== 'timeline' && tab !== 'time') || ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const tl0 = tl;
    try {
      tl = view();
      if (tl) onTimelineKey(ev);
    } finally { tl = tl0; }
  };
  const onTimelineKey = (ev) => {
    if (/^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(ev.target.tagName) && ev.target !== tl.el) return;
    if (document.querySelector('dialog[open]')) return;
    const k = ev.key;
    if (k === 'j' || k === 'ArrowDown') tl.select((tl.selected || 0) + 1);
    else if (k === 'k' || k === 'ArrowUp') tl.select((tl.selected || 2) - 1);
    else if (k === 'g' || k === 'Home') tl.select(1);
    else if (k === 'G' || k === 'End') tl.select(tl.count);
    else if (k === 'PageDown') tl.select((tl.selected || 0) + Math.floor(tl.el.clientHeight / tl.rowH));
    else if (k === 'PageUp') tl.select((tl.selected || 0) - Math.floor(tl.el.clientHeight / tl.rowH));
    else if (k === 'f') toggleFollow();
    else if (k === 'Enter') detail.focus();
    else return;
    ev.preventDefault();
  };
  document.addEventListener('keydown', onKey);

  setTab(tab);
  clear(tlBox, h('p', { class: 'loading', text: 'Loading steps…' }));
  (async () => {
    try {
      sess = await api(`/v1/sessions/${enc(id)}`);
    } catch (e) {
      if (e.status === 404) clear(main, h('div', { class: 'empty' }, h('h1', { text: 'No such session' }), h('p', { text: e.message }), h('p', null, h('a', { href: '#/', text: 'Back to sessions' }))));
      else clear(main, downState(e, () => { window.dispatchEvent(new HashChangeEvent('hashchange')); location.reload(); }, 'the session'));
      return;
    }
    if (closed) return;
    tl = new Timeline(id, sess.last_sequence, { onSelect: showDetail, forkSequence: sess.fork_sequence || 0 });
    clear(tlBox, h('div', { class: 'tl-head', 'aria-hidden': 'true' }, ['#', '', 'kind', 'step', 'summary', 'status', 'time', 'tokens', 'cost'].map((t) => h('span', { text: t }))), tl.el);
    renderHead();
    tl.render();
    tl.ensure(1).catch(() => {}).finally(() => { rowsShown = true; if (!closed) setTimeout(() => box.update(), 0); });
    // A step is always selected: the one in the route, else a fork's first
    // own step, else the first.
    const first = seq || (sess.parent_session_id && sess.fork_sequence < sess.last_sequence ? sess.fork_sequence + 1 : 1);
    if (sess.last_sequence) tl.select(first); else renderDetail(detail, id, null);
    if (tab === 'time') openWaterfall();
    // Live: every event after the last committed step we know of.
    es = stream(`/v1/sessions/${enc(id)}/events`, {
      lastId: sess.last_sequence + ':0',
      onEvent,
      onState: (st) => {
        if (st === 'reconnecting') { window.__stepwiseReconnects = (window.__stepwiseReconnects || 0) + 1; resync = true; }
        // Run events are not replayed after a reconnect: re-read the run.
        if (st === 'live' && resync) { resync = false; refresh(); refreshPending(); }
        conn.textContent = st === 'live' ? '● live' : st === 'reconnecting' ? '○ reconnecting…' : ''; conn.className = 'conn ' + st; },
    });
    refresh();
    refreshPending();
  })();
  // While a run is active, re-read it now and then (a safety net for run
  // events a resumed stream cannot replay).
  const poll = setInterval(() => { const r = latestRun(); if (!document.hidden && r && ACTIVE.has(r.status)) refresh(); }, 5000);

  return {
    close() {
      closed = true; es?.close(); tl?.destroy(); wf?.destroy(); clearInterval(poll);
      document.removeEventListener('keydown', onKey);
      conn.textContent = ''; conn.className = 'conn';
    },
    // navigate handles a move to another step of this session in place.
    navigate(r) {
      const [a, b, c] = r.segs;
      if (a !== 's' || b !== id || c === 'graph' || (r.query.tab || 'timeline') !== tab) return false;
      if (c && view() && +c !== view().selected) view().select(+c);
      return true;
    },
  };
}
