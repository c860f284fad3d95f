// Acting on sessions: answering input requests and approvals, fork (with an
// edited message), retry, replay, cancel and scoring a step.

import { api, APIError } from './api.js';
import { clip, h, inlineCode, jsonView, route, toast } from './dom.js';
import { schemaForm } from './schemaform.js';
import { sessionLink } from './names.js';

const enc = encodeURIComponent;

export function inputsChanged() { window.dispatchEvent(new Event('stepwise:inputs-changed')); }

// inputCard renders a pending input request with its form. p is a pending
// input ({request_id, run_id, session_id, request}). onDone runs after a
// successful answer.
export function inputCard(p, { onDone, showSession = false } = {}) {
  const req = p.request || {};
  const err = h('p', { class: 'error', role: 'alert', hidden: true });
  const fail = (e) => { err.hidden = false; err.textContent = e.message; };
  const send = async (answer, btns) => {
    err.hidden = true;
    btns.forEach((b) => { b.disabled = true; });
    try {
      await api(`/v1/runs/${enc(p.run_id)}/inputs/${enc(p.request_id)}`, { method: 'POST', body: { answer } });
      toast('Answer sent; the run resumes.');
      inputsChanged();
      onDone?.();
    } catch (e) {
      if (e instanceof APIError && e.code === 'already_answered') { toast('Already answered.'); inputsChanged(); onDone?.(); return; }
      fail(e);
    } finally {
      btns.forEach((b) => { b.disabled = false; });
    }
  };
  const head = h('div', { class: 'card-head' },
    h('strong', { text: req.approval ? 'Approval needed' : req.breakpoint ? 'Paused at a breakpoint' : 'Input requested' }),
    showSession ? h('span', { class: 'small' }, sessionLink(p.session_id)) : null,
    req.expires_at ? h('span', { class: 'muted small', text: 'expires ' + new Date(req.expires_at).toLocaleString() }) : null);
  const body = [];
  if (req.prompt) body.push(inlineCode(req.prompt, 'p', { class: 'prompt' }));
  if (req.context && Object.keys(req.context).length) body.push(h('details', null, h('summary', { text: 'Context' }), jsonView(req.context)));
  let form;
  if (req.approval) {
    const call = req.approval;
    let args = call.arguments;
    const mid = 'm' + p.request_id, aid = 'a' + p.request_id;
    const msg = h('input', { id: mid, type: 'text', placeholder: 'Optional: why (shown to the model if rejected)' });
    const always = h('input', { id: aid, type: 'checkbox' });
    const approve = h('button', { type: 'submit', class: 'primary', 'data-action': 'approve', text: 'Approve' });
    const reject = h('button', { type: 'button', class: 'danger', 'data-action': 'reject', text: 'Reject' });
    body.push(h('div', { class: 'call' }, h('span', { class: 'muted', text: 'Tool call ' }), h('code', { class: 'tool', text: call.name }), jsonView(args ?? {})));
    form = h('form', { class: 'answer', onsubmit: (ev) => { ev.preventDefault(); send({ approved: true, message: msg.value || undefined, always: always.checked || undefined }, [approve, reject]); } },
      h('div', { class: 'field' }, h('label', { for: mid, text: 'Message' }), msg),
      h('div', { class: 'field check' }, always, h('label', { for: aid }, 'Always allow ', h('code', { text: call.name }), ' in this session')),
      err, h('div', { class: 'actions' }, approve, reject));
    reject.addEventListener('click', () => send({ approved: false, message: msg.value || 'rejected by the user' }, [approve, reject]));
  } else if (req.breakpoint) {
    // A breakpoint's pause (docs/breakpoints.md): continue, step once, or
    // edit the state (a JSON object merged into it) and continue.
    const bp = req.breakpoint;
    const sid = 's' + p.request_id;
    body.push(h('p', { class: 'bp-where', dataset: { when: bp.when, step: bp.step } }, `Paused ${bp.when} step `, h('code', { text: bp.step }),
      bp.kind ? h('span', { class: 'muted', text: ` (${bp.kind})` }) : null,
      bp.tools?.length ? [' calling ', bp.tools.map((t, i) => [i ? ', ' : '', h('code', { class: 'tool', text: t })])] : null,
      h('span', { class: 'muted small', text: bp.matched === 'step' ? ' · stepping' : ` · breakpoint ${bp.matched}` })));
    const state = h('textarea', { id: sid, class: 'bp-state', rows: '4', spellcheck: 'false' });
    state.value = bp.state ? JSON.stringify(bp.state, null, 2) : '{}';
    const original = state.value;
    const cont = h('button', { type: 'submit', class: 'primary', 'data-action': 'bp-continue', text: 'Continue' });
    const step = h('button', { type: 'button', 'data-action': 'bp-step', text: 'Step' });
    const edit = h('button', { type: 'button', 'data-action': 'bp-edit', text: 'Edit state and continue' });
    const btns = [cont, step, edit];
    const editField = h('div', { class: 'field', hidden: true }, h('label', { for: sid, text: 'Run state (JSON object, merged into the state)' }), state);
    const answerWith = (action) => {
      if (editField.hidden || state.value === original) return send(action, btns);
      let v;
      try { v = JSON.parse(state.value); } catch (e) { fail(new Error('The state is not JSON: ' + e.message)); return; }
      if (!v || typeof v !== 'object' || Array.isArray(v)) { fail(new Error('The state must be a JSON object.')); return; }
      send({ action, state: v }, btns);
    };
    edit.addEventListener('click', () => {
      if (editField.hidden) { editField.hidden = false; edit.textContent = 'Apply and continue'; state.focus(); return; }
      answerWith('continue');
    });
    step.addEventListener('click', () => answerWith('step'));
    form = h('form', { class: 'answer', onsubmit: (ev) => { ev.preventDefault(); answerWith('continue'); } }, editField, err, h('div', { class: 'actions' }, cont, step, edit));
  } else {
    const f = schemaForm(req.schema, { label: 'Answer' });
    const submit = h('button', { type: 'submit', class: 'primary', text: 'Send answer' });
    form = h('form', { class: 'answer', onsubmit: (ev) => {
      ev.preventDefault();
      let v;
      try { v = f.value(); } catch (e) { fail(e); return; }
      if (!req.schema && typeof v === 'string' && !v.trim()) { fail(new Error('Write an answer first.')); return; }
      send(v, [submit]);
    } }, f.el, err, h('div', { class: 'actions' }, submit));
  }
  return h('section', { class: 'card input-card', 'aria-label': req.approval ? 'Approval request' : req.breakpoint ? 'Breakpoint' : 'Input request', dataset: { request: p.request_id } }, head, body, form);
}

// modal shows a dialog built from content; it resolves with the submit
// handler's result, or null when cancelled.
export function modal(title, content, { submitLabel = 'OK', danger = false, onSubmit }) {
  return new Promise((resolve) => {
    const err = h('p', { class: 'error', role: 'alert', hidden: true });
    const ok = h('button', { type: 'submit', class: danger ? 'danger' : 'primary', text: submitLabel });
    const cancel = h('button', { type: 'button', text: 'Cancel' });
    const tid = 'dlg-' + Math.random().toString(36).slice(2);
    const dlg = h('dialog', { 'aria-labelledby': tid });
    const form = h('form', { method: 'dialog' }, h('h2', { id: tid, text: title }), content, err, h('div', { class: 'actions' }, cancel, ok));
    dlg.appendChild(form);
    document.body.appendChild(dlg);
    const done = (v) => { dlg.close(); dlg.remove(); resolve(v); };
    cancel.addEventListener('click', () => done(null));
    dlg.addEventListener('cancel', (ev) => { ev.preventDefault(); done(null); });
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      ok.disabled = true;
      err.hidden = true;
      try { done(await onSubmit()); } catch (e) { err.hidden = false; err.textContent = e.message; } finally { ok.disabled = false; }
    });
    dlg.showModal();
  });
}

// forkAt forks a session at a step, optionally editing its message.
export async function forkAt(sessionID, step) {
  const editable = step && step.role && step.status !== 'waiting';
  const edit = h('input', { type: 'checkbox', id: 'fork-edit' });
  const text = h('textarea', { id: 'fork-text', rows: 6, disabled: true });
  text.value = step?.content || '';
  edit.addEventListener('change', () => { text.disabled = !edit.checked; if (edit.checked) text.focus(); });
  const title = h('input', { id: 'fork-title', type: 'text', placeholder: 'Optional title' });
  const explain = h('p');
  const say = () => {
    explain.textContent = edit.checked
      ? (step.sequence > 1 ? `The fork shares steps 1–${step.sequence - 1} with this session and gets an edited copy of step ${step.sequence}.` : 'A new session starts from the edited first message.') + ' The original never changes.'
      : `The fork shares steps 1–${step.sequence} with this session (nothing is copied); the original never changes.`;
  };
  edit.addEventListener('change', say);
  say();
  const content = h('div', null, explain,
    h('div', { class: 'field' }, h('label', { for: 'fork-title', text: 'Title' }), title),
    editable ? [h('div', { class: 'field check' }, edit, h('label', { for: 'fork-edit', text: `Edit the ${step.role} message of step ${step.sequence}` })),
      h('div', { class: 'field' }, h('label', { for: 'fork-text', text: 'Message' }), text)] : null);
  const s = await modal('Fork at step ' + step.sequence, content, {
    submitLabel: 'Fork',
    onSubmit: () => api(`/v1/sessions/${enc(sessionID)}/fork`, { method: 'POST', body: { sequence: step.sequence, title: title.value || undefined, edit: editable && edit.checked ? text.value : undefined } }),
  });
  if (s) { toast('Forked.'); location.hash = route(['s', s.id]); }
}

// retryFrom regenerates from a step (non-destructive: a fork runs again).
export async function retryFrom(sessionID, step) {
  const r = await modal('Retry from step ' + step.sequence, h('p', { text: 'A fork of this session at step ' + (step.sequence - 1) + ' runs the agent again from here. This session stays as it is.' }), {
    submitLabel: 'Retry',
    onSubmit: () => api(`/v1/sessions/${enc(sessionID)}/retry`, { method: 'POST', body: { sequence: step.sequence } }),
  });
  if (r) { toast('Retry queued.'); location.hash = route(['s', r.run.session_id]); }
}

// replay re-runs a session reusing recorded model and tool outputs.
export async function replay(sessionID) {
  const live = h('input', { type: 'checkbox', id: 'replay-live' });
  const r = await modal('Replay session', h('div', null,
    h('p', { text: 'Runs the agent again over this session in a new fork. Model and tool outputs are reused while the requests match; from the first difference on, calls are live.' }),
    h('div', { class: 'field check' }, live, h('label', { for: 'replay-live', text: 'Execute every tool live' }))), {
    submitLabel: 'Replay',
    onSubmit: () => api(`/v1/sessions/${enc(sessionID)}/replay`, { method: 'POST', body: live.checked ? { all_tools_live: true } : {} }),
  });
  if (r) { toast('Replay queued.'); location.hash = route(['s', r.run.session_id]); }
}

// cancelRun cancels an unfinished run.
export async function cancelRun(runID) {
  const reason = h('input', { id: 'cancel-reason', type: 'text', placeholder: 'Optional reason' });
  const r = await modal('Cancel run', h('div', null, h('p', { text: 'The run stops at once and is marked cancelled.' }), h('div', { class: 'field' }, h('label', { for: 'cancel-reason', text: 'Reason' }), reason)), {
    submitLabel: 'Cancel run', danger: true,
    onSubmit: () => api(`/v1/runs/${enc(runID)}/cancel`, { method: 'POST', body: reason.value ? { reason: reason.value } : {} }),
  });
  if (r) toast('Run cancelled.');
  return r;
}

// scoreStep records a user score on a step (POST /v1/steps/{id}/evals).
export async function scoreStep(step) {
  const score = h('input', { id: 'score-value', type: 'number', min: '0', max: '1', step: '0.05', value: '1', required: true });
  const label = h('input', { id: 'score-label', type: 'text', placeholder: 'e.g. good, wrong tool' });
  const desc = h('textarea', { id: 'score-desc', rows: 3 });
  return modal('Score step ' + step.sequence, h('div', null,
    h('div', { class: 'field' }, h('label', { for: 'score-value', text: 'Score (0 worst – 1 best)' }), score),
    h('div', { class: 'field' }, h('label', { for: 'score-label', text: 'Label' }), label),
    h('div', { class: 'field' }, h('label', { for: 'score-desc', text: 'Description' }), desc)), {
    submitLabel: 'Save score',
    onSubmit: () => {
      const v = Number(score.value);
      if (!(v >= 0 && v <= 1)) throw new Error('The score must be between 0 and 1.');
      return api(`/v1/steps/${enc(step.id)}/evals`, { method: 'POST', body: { name: 'user', source: 'user', score: v, label: label.value || undefined, description: desc.value || undefined } });
    },
  });
}
