// Signals: matches below the alerting level and anomalies short of an alert (docs/risk.md). They
// never reach the alert queue, and they are what a risk alert is made of, so an analyst hunting
// around an entity, or asking "what did this rule see today", reads them here: filtered by time,
// detector and entity, each opened in place with its events, and excepted like an alert.

import {get} from './api.js';
import {h, fill} from './dom.js';
import {count, entity, iso, severityBadge, thresholdText} from './format.js';
import {exceptionForm} from './exceptions.js';

const PAGE = 100;
const HOUR_MS = 3600e3;
/** Time windows offered, in hours (0: all that retention kept). */
const WINDOWS = [[24, 'last 24 hours'], [24 * 7, 'last 7 days'], [24 * 30, 'last 30 days'], [0, 'all kept']];

export function mountSignals(root) {
  let page = 1;
  let open = null;
  const windowSelect = h('select', {id: 'signal-window', 'aria-label': 'Time window'},
    WINDOWS.map(([hours, label]) => h('option', {value: hours}, label)));
  const detector = h('input', {id: 'signal-detector', type: 'search', placeholder: 'detector (rule id, ensemble)',
    'aria-label': 'Detector', maxlength: 256});
  const who = h('input', {id: 'signal-entity', type: 'search', placeholder: 'entity (user, host, address)',
    'aria-label': 'Entity', maxlength: 256});
  // Latest activity first by default, as the alert feed: a signal that keeps matching rises.
  const sort = h('select', {id: 'signal-sort', 'aria-label': 'Order', on: {change: () => {
    fill(timeHeader, sort.value === 'first_seen' ? 'First seen' : 'Last activity');
    load(1);
  }}}, h('option', {value: 'last_seen'}, 'Latest activity first'), h('option', {value: 'first_seen'}, 'Newest first'));
  const timeHeader = h('th', {scope: 'col'}, 'Last activity');
  const error = h('span', {class: 'error', role: 'alert', id: 'signal-error'});
  const summary = h('span', {class: 'muted', id: 'signal-total'});
  const body = h('tbody', {id: 'signal-rows'});
  const more = h('button', {type: 'button', id: 'signal-more', hidden: true, on: {click: () => load(page + 1)}}, 'Load more');
  const form = h('form', {class: 'toolbar', on: {submit: (ev) => { ev.preventDefault(); load(1); }}},
    windowSelect, detector, who, sort, h('button', {type: 'submit'}, 'Search'), summary, error);
  root.append(
    h('p', {class: 'muted'}, 'Signals add risk to their entities instead of alerting: low and informational rule '
      + 'matches, and volume anomalies short of an alert. An entity whose risk crosses the threshold raises one '
      + '"risk" alert that lists them.'),
    form,
    h('div', {class: 'scroll'},
      h('table', {class: 'rows', id: 'signal-table'},
        h('thead', {}, h('tr', {}, timeHeader, ['Sev', 'Signal', 'Entity', 'Matches']
          .map((c) => h('th', {scope: 'col'}, c)))),
        body)),
    more);

  function query(at) {
    const q = {page: at, limit: PAGE, sort: sort.value};
    const hours = Number(windowSelect.value);
    if (hours > 0) q.since = new Date(Date.now() - hours * HOUR_MS).toISOString();
    if (detector.value.trim()) q.detector = detector.value.trim();
    if (who.value.trim()) q.entity = who.value.trim();
    return q;
  }

  async function load(at = 1) {
    fill(error);
    let answer;
    try {
      answer = await get('/signals', query(at));
    } catch (e) {
      // A bad filter comes back as a 422 naming the parameter: say which box to fix.
      const parameter = e.body && e.body.parameter;
      fill(error, parameter ? `${parameter}: ${e.message}` : e.message);
      return;
    }
    page = at;
    if (at === 1) {
      body.replaceChildren();
      open = null;
    }
    for (const s of answer.items) body.append(row(s));
    if (!body.children.length) {
      body.append(h('tr', {}, h('td', {colspan: 5, class: 'muted'}, 'No signals match.')));
    }
    const shown = Math.min(answer.meta.total, at * PAGE);
    fill(summary, `${count(answer.meta.total)} signal${answer.meta.total === 1 ? '' : 's'}`
      + `${shown < answer.meta.total ? ` (first ${count(shown)} shown)` : ''}`);
    more.hidden = shown >= answer.meta.total;
  }

  function row(s) {
    const more = s.entity_count > 1 ? ` +${count(s.entity_count - 1)} more` : '';
    const who = s.entity ? `${entity(s.entity)}${more}`
      : s.entity_count > 1 ? `${count(s.entity_count)} entities` : '—';
    const at = sort.value === 'first_seen' ? s.first_seen_ns : s.last_seen_ns;
    const tr = h('tr', {class: 'clickable', tabindex: 0, dataset: {id: s.id},
      on: {click: () => toggle(tr, s), keydown: (ev) => { if (ev.key === 'Enter') toggle(tr, s); }}},
    h('td', {title: `last activity ${iso(s.last_seen_ns)}, first seen ${iso(s.first_seen_ns)}`},
      iso(at).replace('T', ' ').slice(0, 19)),
    h('td', {}, severityBadge(s.severity)),
    h('td', {}, s.title, h('div', {class: 'muted small', title: s.detector}, s.detector_name || s.detector)),
    h('td', {class: 'mono'}, who),
    h('td', {class: 'num'}, count(s.count)));
    return tr;
  }

  /** Opens a signal under its row (one at a time), with its events and an exception form. */
  async function toggle(tr, s) {
    if (open) {
      const was = open.previousElementSibling;
      open.remove();
      open = null;
      if (was === tr) return;
    }
    const cell = h('td', {colspan: 5, class: 'signal-detail'}, h('p', {class: 'muted'}, 'Loading…'));
    open = h('tr', {id: 'signal-open'}, cell);
    tr.after(open);
    let d;
    try {
      d = await get(`/signals/${encodeURIComponent(s.id)}`);
    } catch (e) {
      fill(cell, h('p', {class: 'error'}, `Could not load the signal: ${e.message}`));
      return;
    }
    const slot = h('div', {});
    const except = h('button', {type: 'button', id: 'signal-exception', on: {click: () => {
      fill(slot, exceptionForm(d));
      except.hidden = true;
    }}}, 'Make an exception…');
    fill(cell,
      h('dl', {class: 'facts'},
        fact('Id', d.id),
        fact('First / last seen', `${iso(d.first_seen_ns)} · ${iso(d.last_seen_ns)}`),
        fact('Source', d.source),
        // A rule's match has no score; an anomaly's is what put it past its source's threshold.
        d.threshold > 0 && fact('Score / threshold', `${d.score.toFixed(3)} / ${thresholdText(d.threshold)}`),
        d.attack && d.attack.length && fact('ATT&CK', d.attack.map((m) => `${m.technique_id} ${m.technique} (${m.tactic})`).join('; ')),
        d.related_entities && d.related_entities.length
          && fact('Related', d.related_entities.map((e) => `${entity(e)} (${e.role})`).join(', '))),
      h('h3', {}, `Events (${d.events.length}${d.count > d.events.length ? ` of ${count(d.count)} matches` : ''})`),
      h('ul', {class: 'events'}, d.events.map((e) => h('li', {}, h('span', {class: 'muted'}, iso(e.timestamp_ns)), ' ',
        h('span', {class: 'mono'}, e.source), ' ', e.message))),
      except, slot);
  }

  function fact(name, value) {
    return [h('dt', {}, name), h('dd', {class: 'mono'}, value || '—')];
  }

  return {load: () => load(1)};
}
