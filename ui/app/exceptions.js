// Exceptions: made from an alert (its detector, the entities it names, a reason, an author and
// an expiry) and listed with what each held back. An exception applies before alerting, so the
// list's hit counts are the only place a suppressed event still shows: they are the first column
// an analyst reads.

import {del, get, patch, post} from './api.js';
import {fill, h, stored} from './dom.js';
import {count, iso} from './format.js';

const DAY_NS = 86400e9;
const AUTHOR_KEY = 'watchpost.author';
/** Condition lists by entity kind. */
const LIST_OF = {user: 'users', host: 'hosts', ip: 'ips', domain: 'domains'};

/** What an exception asks of an event, in one line. */
export function conditionsText(c) {
  const parts = [];
  for (const [name, values] of Object.entries(c || {})) {
    if (values && values.length) parts.push(`${name.replace('_', ' ')}: ${values.join(', ')}`);
  }
  return parts.length ? parts.join(' · ') : 'every event';
}

/**
 * A form that makes an exception from alert `a`: one checkbox per entity the alert names (the
 * alert's own checked), the detector or every detector, a reason, an author and an expiry.
 */
export function exceptionForm(a, onDone) {
  const entities = [a.entity, ...(a.related_entities || [])]
    .filter((e) => e && LIST_OF[e.kind])
    .filter((e, i, all) => all.findIndex((x) => x.kind === e.kind && x.value === e.value) === i);
  const boxes = entities.map((e, i) => {
    const box = h('input', {type: 'checkbox', checked: i === 0, dataset: {kind: e.kind, value: e.value}});
    return h('label', {class: 'mono'}, box, ` ${e.kind} ${e.value}`);
  });
  const scope = h('select', {name: 'scope', 'aria-label': 'Applies to'},
    h('option', {value: 'detector'}, `this detector (${a.detector_name || a.detector})`),
    h('option', {value: 'global'}, 'every detector'));
  const reason = h('input', {type: 'text', name: 'reason', required: true, maxlength: 1024,
    placeholder: 'Why these alerts are expected', 'aria-label': 'Reason'});
  const author = h('input', {type: 'text', name: 'author', required: true, maxlength: 1024,
    value: stored.get(AUTHOR_KEY) || '', placeholder: 'Your name', 'aria-label': 'Author'});
  const expiry = h('select', {name: 'expiry', 'aria-label': 'Expires'},
    h('option', {value: '0'}, 'never expires'),
    h('option', {value: '7'}, 'expires in 7 days'),
    h('option', {value: '30', selected: true}, 'expires in 30 days'),
    h('option', {value: '90'}, 'expires in 90 days'));
  const result = h('span', {role: 'status', class: 'muted'});
  const form = h('form', {class: 'exception-form', id: 'exception-form', on: {submit: async (ev) => {
    ev.preventDefault();
    const conditions = {};
    for (const label of boxes) {
      const box = label.querySelector('input');
      if (!box.checked) continue;
      const list = LIST_OF[box.dataset.kind];
      (conditions[list] = conditions[list] || []).push(box.dataset.value);
    }
    const days = Number(expiry.value);
    const body = {
      scope: scope.value,
      conditions,
      reason: reason.value,
      author: author.value,
      from_alert: a.id,
    };
    if (scope.value === 'detector') body.detector = a.detector;
    if (days > 0) body.expires_ns = Date.now() * 1e6 + days * DAY_NS;
    try {
      const made = await post('/exceptions', body);
      stored.set(AUTHOR_KEY, author.value);
      fill(result, `Exception created: from now on, ${conditionsText(made.conditions)} raises no alert`
        + `${made.detector ? ` from ${made.detector}` : ''}.`);
      result.className = 'muted';
      if (onDone) onDone(made);
    } catch (e) {
      fill(result, e.field ? `${e.field}: ${e.message}` : e.message);
      result.className = 'error';
    }
  }}},
  h('p', {class: 'muted'}, 'Events that match are held back before alerting and counted on the exception.'),
  boxes.length ? h('div', {class: 'checks'}, boxes) : h('p', {class: 'muted'}, 'The alert names no entity: the exception covers its whole detector.'),
  h('div', {class: 'row'}, scope, expiry),
  h('div', {class: 'row'}, reason, author),
  h('div', {class: 'row'}, h('button', {type: 'submit', id: 'exception-save'}, 'Create exception'), result));
  return form;
}

/** The Exceptions tab: every exception, newest first, with hits, and switches to turn one off or remove it. */
export function mountExceptions(root) {
  const summary = h('span', {class: 'muted', id: 'exceptions-summary'});
  const refresh = h('button', {type: 'button', on: {click: load}}, 'Refresh');
  const body = h('tbody');
  const table = h('table', {class: 'rows', id: 'exceptions-table'},
    h('thead', {}, h('tr', {},
      ['Hits', 'Last hit', 'Detector', 'Conditions', 'Reason', 'Author', 'Expires', 'On', ''].map((t) => h('th', {scope: 'col'}, t)))),
    body);
  root.append(h('div', {class: 'toolbar'}, refresh, summary), h('div', {class: 'scroll'}, table));

  async function load() {
    try {
      const page = await get('/exceptions', {limit: 1000});
      const held = page.items.reduce((n, e) => n + e.hits, 0);
      fill(summary, `${count(page.meta.total)} exception${page.meta.total === 1 ? '' : 's'}, ${count(held)} event${held === 1 ? '' : 's'} held back`);
      fill(body, page.items.length ? page.items.map(row)
        : h('tr', {}, h('td', {colspan: 9, class: 'muted'}, 'No exceptions. Make one from an alert\'s detail.')));
    } catch (e) {
      fill(summary, e.message);
    }
  }

  function row(e) {
    const expired = e.expires_ns && e.expires_ns <= Date.now() * 1e6;
    const toggle = h('input', {type: 'checkbox', checked: e.enabled, 'aria-label': 'Enabled', on: {change: async () => {
      try {
        await patch(`/exceptions/${e.id}`, {enabled: toggle.checked});
      } catch (err) {
        toggle.checked = !toggle.checked;
        fill(summary, err.message);
      }
      load();
    }}});
    const remove = h('button', {type: 'button', class: 'danger', on: {click: async () => {
      if (!confirm(`Remove the exception "${e.reason}"? Alerts it held back stay unraised.`)) return;
      try {
        await del(`/exceptions/${e.id}`);
      } catch (err) {
        fill(summary, err.message);
      }
      load();
    }}}, 'Remove');
    return h('tr', {class: e.enabled && !expired ? '' : 'muted', dataset: {id: e.id}},
      h('td', {class: 'num'}, count(e.hits)),
      h('td', {}, e.last_hit_ns ? iso(e.last_hit_ns) : '—'),
      h('td', {class: 'mono'}, e.scope === 'global' ? 'every detector' : e.detector),
      h('td', {class: 'mono'}, conditionsText(e.conditions)),
      h('td', {}, e.reason),
      h('td', {}, e.author),
      h('td', {}, e.expires_ns ? `${expired ? 'expired ' : ''}${iso(e.expires_ns)}` : 'never'),
      h('td', {}, toggle),
      h('td', {}, remove));
  }

  return {load};
}
