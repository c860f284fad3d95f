// Forms generated from a JSON Schema, for answering input requests. The
// generator covers objects, arrays, strings (enum → select, long → text
// area), numbers, integers and booleans; anything else (oneOf, $ref…) gets
// a JSON text area. The value collected is checked by the server against
// the same schema.

import { h } from './dom.js';

let uid = 0;
const nextID = () => 'f' + (++uid);

// schemaForm returns {el, value()} for a schema; value() throws an Error
// with a user-facing message when a field cannot be read.
export function schemaForm(schema, { label = 'Answer' } = {}) {
  if (!schema || typeof schema !== 'object') return textField(label);
  return field(schema, label, true, 0);
}

function textField(label) {
  const id = nextID();
  const ta = h('textarea', { id, rows: 3, required: true, 'data-field': 'answer' });
  return { el: h('div', { class: 'field' }, h('label', { for: id, text: label }), ta), value: () => ta.value };
}

function typeOf(s) {
  if (Array.isArray(s.type)) return s.type.find((t) => t !== 'null') || 'string';
  if (s.type) return s.type;
  if (s.properties) return 'object';
  if (s.items) return 'array';
  if (s.enum) return typeof s.enum[0] === 'number' ? 'number' : 'string';
  return '';
}

function field(s, label, required, depth) {
  const t = typeOf(s);
  const title = s.title || label;
  const help = s.description ? h('p', { class: 'help', text: s.description }) : null;
  if (t === 'object' && s.properties && depth < 6) return objectField(s, title, help, depth);
  if (t === 'array' && s.items && typeof s.items === 'object' && depth < 6) return arrayField(s, title, help, depth);
  const id = nextID();
  const lab = h('label', { for: id }, title, required ? h('span', { class: 'req', 'aria-hidden': 'true', text: ' *' }) : null);
  if (s.enum) {
    const sel = h('select', { id, required }, required ? null : h('option', { value: '', text: '—' }),
      s.enum.map((v, i) => h('option', { value: String(i), text: String(v), selected: s.default === v })));
    return { el: h('div', { class: 'field' }, lab, sel, help), value: () => (sel.value === '' ? undefined : s.enum[+sel.value]) };
  }
  switch (t) {
    case 'boolean': {
      const cb = h('input', { id, type: 'checkbox', checked: s.default === true });
      return { el: h('div', { class: 'field check' }, cb, lab, help), value: () => cb.checked };
    }
    case 'integer':
    case 'number': {
      const inp = h('input', { id, type: 'number', required, step: t === 'integer' ? '1' : 'any', min: s.minimum, max: s.maximum, value: s.default });
      return {
        el: h('div', { class: 'field' }, lab, inp, help),
        value: () => {
          if (inp.value === '') { if (required) throw new Error(title + ' is required'); return undefined; }
          const n = Number(inp.value);
          if (!Number.isFinite(n) || (t === 'integer' && !Number.isInteger(n))) throw new Error(title + ' must be ' + (t === 'integer' ? 'an integer' : 'a number'));
          return n;
        },
      };
    }
    case 'string': {
      const long = !s.maxLength || s.maxLength > 120 || s.format === 'textarea';
      const inp = long ? h('textarea', { id, rows: 3, required, maxlength: s.maxLength }) : h('input', { id, type: s.format === 'email' ? 'email' : s.format === 'date' ? 'date' : 'text', required, maxlength: s.maxLength, pattern: s.pattern });
      if (s.default !== undefined) inp.value = String(s.default);
      return {
        el: h('div', { class: 'field' }, lab, inp, help),
        value: () => {
          if (inp.value === '' && !required) return undefined;
          if (inp.value === '' && required) throw new Error(title + ' is required');
          return inp.value;
        },
      };
    }
    default: {
      const ta = h('textarea', { id, rows: 4, required, class: 'mono', placeholder: 'JSON value' });
      if (s.default !== undefined) ta.value = JSON.stringify(s.default, null, 2);
      return {
        el: h('div', { class: 'field' }, lab, ta, h('p', { class: 'help', text: (s.description ? s.description + ' — ' : '') + 'Enter JSON.' })),
        value: () => {
          if (ta.value.trim() === '') { if (required) throw new Error(title + ' is required'); return undefined; }
          try { return JSON.parse(ta.value); } catch (e) { throw new Error(title + ': invalid JSON (' + e.message + ')'); }
        },
      };
    }
  }
}

function objectField(s, title, help, depth) {
  const req = new Set(s.required || []);
  const kids = Object.entries(s.properties).map(([k, sub]) => [k, field(sub || {}, k, req.has(k), depth + 1)]);
  const el = depth === 0
    ? h('div', { class: 'fields' }, help, kids.map(([, f]) => f.el))
    : h('fieldset', null, h('legend', { text: title }), help, kids.map(([, f]) => f.el));
  return {
    el,
    value: () => {
      const out = {};
      for (const [k, f] of kids) { const v = f.value(); if (v !== undefined) out[k] = v; }
      return out;
    },
  };
}

function arrayField(s, title, help, depth) {
  const items = [];
  const list = h('div', { class: 'array-items' });
  const add = () => {
    const f = field(s.items, title + ' ' + (items.length + 1), true, depth + 1);
    const row = h('div', { class: 'array-item' }, f.el,
      h('button', { type: 'button', class: 'icon', 'aria-label': 'Remove item', text: '×', onclick: () => { items.splice(items.indexOf(entry), 1); row.remove(); } }));
    const entry = { f, row };
    items.push(entry);
    list.appendChild(row);
  };
  for (let i = 0; i < (s.minItems || 0); i++) add();
  return {
    el: h('fieldset', null, h('legend', { text: title }), help, list, h('button', { type: 'button', text: '+ Add', onclick: add })),
    value: () => items.map((e) => e.f.value()),
  };
}
