// The Alert Feed (latest activity first by default, or newest first: the analyst's choice,
// remembered; coloured by severity, live from the stream) and the alert detail with its
// explanation (or plain summary), triage and tp/fp feedback. The Time column is the time the
// feed is sorted by, and says which: a feed sorted by creation while it showed the last
// activity put an alert that had just repeated below quieter, newer ones.

import {get, patch, post} from './api.js';
import {h, fill, stored} from './dom.js';
import {attackUrl, clock, count, entity, iso, severityBadge, severityName, thresholdText} from './format.js';
import {deviationText, explanationSection} from './assist.js';
import {exceptionForm} from './exceptions.js';

const PAGE = 100;
const POLL_WHILE_FILTERED_MS = 10000;
const REASONS = ['true_positive', 'benign_positive', 'false_positive', 'duplicate', 'other'];
/** The orders offered: the API's `sort` and what the Time column then shows. */
const SORTS = {
  last_seen: {label: 'Latest activity first', column: 'Last activity', time: (a) => a.last_seen_ns},
  first_seen: {label: 'Newest first', column: 'First seen', time: (a) => a.first_seen_ns},
};
const SORT_KEY = 'watchpost.alerts.sort';
const VIEWS = {
  'open,acknowledged': 'Work queue (open, acknowledged)',
  '': 'All',
  open: 'Open',
  acknowledged: 'Acknowledged',
  closed: 'Closed',
};

export function mountAlerts(root, detailRoot, stream, {onOpen, onClose} = {}) {
  const alerts = new Map();
  /** The last feedback recorded from this page, by alert. */
  const recorded = new Map();
  /** The last bulk triage's outcome from an alert's detail, by alert: it outlives the redraw
   * that the reload after it (and the alerts' own updates on the stream) cause. */
  const triaged = new Map();
  let view = 'open,acknowledged';
  let minSeverity = 0;
  /** On a fleet's console, the sensor the feed is narrowed to ('' for every one). */
  let sensor = '';
  let sort = SORTS[stored.get(SORT_KEY)] ? stored.get(SORT_KEY) : 'last_seen';
  let total = 0;
  let selected = null;
  let detailRequest = 0;

  const viewSelect = h('select', {id: 'alert-view', 'aria-label': 'Triage status',
    on: {change: () => { view = viewSelect.value; load(); }}},
    Object.entries(VIEWS).map(([v, label]) => h('option', {value: v, selected: v === view}, label)));
  const sevSelect = h('select', {id: 'alert-severity', 'aria-label': 'Minimum severity',
    on: {change: () => { minSeverity = Number(sevSelect.value); load(); }}},
    [0, 1, 2, 3, 4, 5].map((s) => h('option', {value: s}, `≥ ${severityName(s)}`)));
  const sortSelect = h('select', {id: 'alert-sort', 'aria-label': 'Order',
    on: {change: () => {
      sort = sortSelect.value;
      stored.set(SORT_KEY, sort);
      fill(timeHeader, SORTS[sort].column);
      load();
    }}},
    Object.entries(SORTS).map(([v, o]) => h('option', {value: v, selected: v === sort}, o.label)));
  // Shown once the node turns out to be part of a fleet (`sensors`).
  const sensorSelect = h('select', {id: 'alert-sensor', 'aria-label': 'Sensor', hidden: true,
    on: {change: () => { sensor = sensorSelect.value; load(); }}},
    h('option', {value: ''}, 'All sensors'));
  const summary = h('span', {class: 'muted', id: 'alert-total'});
  const body = h('tbody', {id: 'alert-rows'});
  const message = h('p', {class: 'muted', id: 'alert-message'}, 'Loading…');
  const timeHeader = h('th', {scope: 'col', id: 'alert-time-header'}, SORTS[sort].column);
  const bulk = bulkBar();
  root.append(
    h('div', {class: 'toolbar'}, viewSelect, sevSelect, sensorSelect, sortSelect, summary, bulk.toggle),
    bulk.bar,
    h('div', {class: 'scroll'},
      h('table', {class: 'rows'},
        h('thead', {}, h('tr', {}, timeHeader, ['Sev', 'Alert', 'Status']
          .map((c) => h('th', {scope: 'col'}, c)))),
        body)),
    message);

  // Triage of every alert the feed's filters select (PATCH /alerts?status=...&severity=...),
  // not only the page shown: a sweep is cleared in one step. "All" at "≥ debug" selects no
  // filter, which the API refuses, so the button is off then.
  function bulkBar() {
    const toggle = h('button', {type: 'button', id: 'bulk-toggle', 'aria-expanded': 'false',
      title: 'Change every alert these filters select'}, 'Triage all…');
    const status = h('select', {name: 'status', 'aria-label': 'Status for all'},
      ['acknowledged', 'closed', 'open'].map((v) => h('option', {value: v}, v)));
    const reason = h('select', {name: 'reason', 'aria-label': 'Closing reason for all'},
      h('option', {value: ''}, 'reason…'), REASONS.map((r) => h('option', {value: r}, r.replace('_', ' '))));
    const note = h('input', {name: 'note', placeholder: 'note', maxlength: 4096});
    const result = h('span', {class: 'muted', role: 'status', id: 'bulk-result'});
    const sync = () => { reason.disabled = status.value !== 'closed'; };
    status.addEventListener('change', sync);
    sync();
    const bar = h('form', {class: 'toolbar bulk', id: 'bulk-bar', hidden: true, on: {submit: async (ev) => {
      ev.preventDefault();
      const q = new URLSearchParams();
      if (view) q.set('status', view);
      if (minSeverity) q.set('severity', String(minSeverity));
      if (sensor) q.set('sensor', sensor);
      const change = {status: status.value};
      if (status.value === 'closed') change.reason = reason.value || undefined;
      if (note.value.trim()) change.note = note.value.trim();
      try {
        const done = await patch(`/alerts?${q}`, change);
        fill(result, `${count(done.changed)} of ${count(done.matched)} alerts changed${done.truncated ? ' (more remain: apply again)' : ''}.`);
        result.className = 'muted';
        load();
      } catch (e) {
        fill(result, e.field ? `${e.field}: ${e.message}` : e.message);
        result.className = 'error';
      }
    }}}, status, reason, note, h('button', {type: 'submit'}, 'Apply to all matching'), result);
    toggle.addEventListener('click', () => {
      bar.hidden = !bar.hidden;
      toggle.setAttribute('aria-expanded', String(!bar.hidden));
    });
    return {toggle, bar, sync: () => {
      toggle.disabled = !view && !minSeverity && !sensor;
      if (toggle.disabled) bar.hidden = true;
    }};
  }

  function passes(a) {
    if (a.severity < minSeverity) return false;
    if (sensor && a.sensor !== sensor) return false;
    return !view || view.split(',').includes(a.triage ? a.triage.status : 'open');
  }

  function row(a) {
    return h('tr', {dataset: {id: a.id}, tabindex: 0, class: a.id === selected ? 'selected' : '',
      on: {click: () => open(a.id), keydown: (e) => { if (e.key === 'Enter') open(a.id); }}},
      h('td', {class: 'nowrap', title: `last activity ${iso(a.last_seen_ns)}, first seen ${iso(a.first_seen_ns)}`},
        clock(SORTS[sort].time(a))),
      h('td', {}, severityBadge(a.severity)),
      h('td', {},
        h('div', {class: 'title'}, a.title),
        h('div', {class: 'muted small'}, a.type, a.entity && ' · ', a.entity && h('span', {class: 'mono'}, entity(a.entity)),
          // A group alert is about its first entity and stands for the others too.
          a.entity_count > 1 && (a.entity ? ` +${count(a.entity_count - 1)} more` : ` · ${count(a.entity_count)} entities`),
          a.count > 1 && ` · ×${count(a.count)}`, a.triage.assignee && ` · ${a.triage.assignee}`,
          a.sensor && h('span', {class: 'sensor', title: 'the sensor that saw it'}, ` · ${a.sensor}`))),
      h('td', {}, h('span', {class: `triage triage-${a.triage.status}`}, a.triage.status)));
  }

  function render() {
    const time = SORTS[sort].time;
    const list = [...alerts.values()].filter(passes)
      .sort((x, y) => Number(time(y)) - Number(time(x)) || (y.id > x.id ? 1 : -1))
      .slice(0, PAGE);
    // Only what is shown is kept: a dashboard left open all day stays the size of one page.
    alerts.clear();
    for (const a of list) alerts.set(a.id, a);
    fill(body, list.map(row));
    fill(summary, `${count(Math.max(total, list.length))} matching`);
    bulk.sync();
    message.hidden = list.length > 0;
    fill(message, view === 'open,acknowledged' && minSeverity === 0
      ? 'The work queue is empty: no open or acknowledged alert. New ones appear here as they fire; '
        + 'the Signals tab lists what adds risk without alerting.'
      : `No alerts match this view${sensor ? ', sensor' : ''} and severity: widen them above.`);
  }

  async function load() {
    try {
      const page = await get('/alerts', {limit: PAGE, status: view, severity: minSeverity || '', sensor, sort});
      alerts.clear();
      for (const a of page.items) alerts.set(a.id, a);
      total = page.meta.total;
      render();
    } catch (e) {
      message.hidden = false;
      fill(message, `Could not load alerts: ${e.message}`);
    }
  }

  // `fresh`: a new alert (an `alert` frame), not a change to one that may already be counted in
  // the API's total (an `alert_batch` frame about an alert beyond the loaded page).
  function upsert(a, fresh) {
    const old = alerts.get(a.id);
    alerts.set(a.id, a);
    const was = old ? passes(old) : false;
    const is = passes(a);
    if ((old || fresh) && was !== is) total += is ? 1 : -1;
    // The open detail follows the alert (repeats, someone else's triage), unless the analyst is
    // typing in it: a refresh would wipe what they typed.
    const active = document.activeElement;
    const typing = detailRoot.contains(active) && active.matches('input, select, textarea');
    if (a.id === selected && !typing) showDetail(a.id, false);
  }

  // The stream's filter applies to alert frames too (the server filters both alike), so while one
  // is in force the feed also reloads from the API, where only its own filters apply.
  let polling = null;
  stream.on('filter', () => {
    clearInterval(polling);
    polling = stream.filtered() ? setInterval(load, POLL_WHILE_FILTERED_MS) : null;
  });
  stream.on('alert', (f) => { upsert(f.alert, true); render(); });
  stream.on('alert_batch', (f) => { for (const a of f.alerts) upsert(a, false); render(); });
  stream.on('state', ({state}) => { if (state === 'open') load(); });

  function open(id) {
    selected = id;
    render();
    showDetail(id, true);
    if (onOpen) onOpen(id);
  }

  async function showDetail(id, focus) {
    detailRoot.hidden = false;
    // Answers may come back out of order (quick clicks, a refresh in flight): only the latest
    // request for the alert still selected is shown.
    const request = ++detailRequest;
    let a;
    let failure = null;
    try {
      a = await get(`/alerts/${encodeURIComponent(id)}`);
    } catch (e) {
      failure = e;
    }
    if (request !== detailRequest || id !== selected) return;
    if (failure) {
      fill(detailRoot, closeButton(), h('p', {class: 'error'}, `Could not load the alert: ${failure.message}`));
      return;
    }
    fill(detailRoot, closeButton(), ...detail(a));
    if (focus) detailRoot.querySelector('h2').focus();
  }

  /** The signals a risk alert adds up, each fetched (they are not alerts: `/signals/{id}`). */
  function signalList(ids) {
    const list = h('ul', {class: 'events', id: 'signal-list'});
    Promise.all(ids.map((id) => get(`/signals/${encodeURIComponent(id)}`).catch(() => null))).then((signals) => {
      fill(list, signals.map((s, i) => s
        ? h('li', {}, h('span', {class: 'muted'}, iso(s.first_seen_ns)), ' ', s.title,
          s.entity ? h('span', {class: 'mono'}, ` · ${entity(s.entity)}`) : null,
          s.count > 1 ? h('span', {class: 'muted'}, ` ×${count(s.count)}`) : null)
        : h('li', {class: 'muted mono'}, `${ids[i]} (no longer kept)`)));
    });
    return list;
  }

  /** The alerts a kill-chain alert joins, in its tactics' order, each opening in the detail. */
  function joinedList(ids) {
    const list = h('ul', {class: 'events', id: 'joined-alerts'});
    Promise.all(ids.map((id) => get(`/alerts/${encodeURIComponent(id)}`).catch(() => null))).then((joined) => {
      fill(list, joined.map((j, i) => j
        ? h('li', {}, h('button', {type: 'button', class: 'link', dataset: {id: j.id}, on: {click: () => open(j.id)}},
          severityBadge(j.severity), ' ', j.title),
        ' ', h('span', {class: 'muted'}, `${iso(j.first_seen_ns)} · ${(j.attack || []).map((m) => m.tactic).filter(Boolean)
          .filter((t, k, all) => all.indexOf(t) === k).join(', ')}`))
        : h('li', {class: 'muted mono'}, `${ids[i]} (no longer kept)`)));
    });
    return list;
  }

  function closeButton() {
    return h('button', {class: 'close', type: 'button', 'aria-label': 'Close detail',
      on: {click: () => { detailRoot.hidden = true; selected = null; render(); if (onClose) onClose(); }}}, '×');
  }

  function detail(a) {
    const t = a.triage;
    const out = [
      h('h2', {tabindex: -1}, severityBadge(a.severity), ' ', a.title),
      h('dl', {class: 'facts'},
        fact('Id', a.id, 'mono'),
        fact('Type', a.type),
        fact('Detector', detectorText(a)),
        fact('Source', a.source),
        a.sensor && fact('Sensor', a.sensor),
        fact('Entity', a.entity
          ? [entityLink(a.entity), a.entity_count > 1 ? ` and ${count(a.entity_count - 1)} more (listed below)` : '']
          : (a.entity_count > 1 ? `${count(a.entity_count)} entities (listed below)` : ''), 'mono'),
        fact('First seen', iso(a.first_seen_ns)),
        fact('Last seen', iso(a.last_seen_ns)),
        fact('Count', count(a.count)),
        fact('Score / threshold', `${a.score.toFixed(3)} / ${thresholdText(a.threshold)}`),
        a.deviation && fact('Deviation', deviationText(a.deviation))),
    ];
    out.push(...explanationSection(a));
    if (a.benign) {
      // The innocent story an analyst looks for first, the facts it rests on, and what would
      // settle it: a reading, not a verdict.
      out.push(h('h3', {}, 'Why it may be benign'), h('section', {id: 'benign', class: 'benign'},
        h('p', {}, a.benign.explanation),
        a.benign.evidence && a.benign.evidence.length
          ? h('ul', {}, a.benign.evidence.map((e) => h('li', {}, e))) : null,
        h('p', {}, h('strong', {}, 'Confirm: '), a.benign.confirm)));
    }
    const contributions = Object.entries(a.contributions || {});
    if (contributions.length) {
      // Scores are in [0, 1]; a risk alert's contributions are risk points (a low signal ~15).
      const top = Math.max(1, ...contributions.map(([, v]) => v));
      out.push(h('h3', {}, a.detector === 'risk' ? 'Risk by signal' : 'Contributions'),
        h('ul', {class: 'bars'}, contributions.map(([k, v]) =>
          h('li', {}, h('span', {}, k), h('meter', {min: 0, max: top, value: v}), h('span', {class: 'num'}, v.toFixed(top > 1 ? 1 : 3))))));
    }
    if (a.detector === 'risk' && a.related_alerts && a.related_alerts.length) {
      out.push(h('h3', {}, `Signals (${a.related_alerts.length})`), signalList(a.related_alerts));
    }
    if (a.detector === 'killchain' && a.related_alerts && a.related_alerts.length) {
      out.push(h('h3', {}, `Alerts it joins (${a.related_alerts.length})`), joinedList(a.related_alerts));
    }
    if (a.attack && a.attack.length) {
      const link = (id, text) => h('a', {href: attackUrl(id), target: '_blank', rel: 'noopener noreferrer'}, text);
      out.push(h('h3', {}, 'ATT&CK'), h('ul', {id: 'alert-attack'}, a.attack.map((m) => h('li', {},
        m.technique_id ? [link(m.technique_id, h('span', {class: 'mono'}, m.technique_id)), ` ${m.technique} `] : null,
        '(', link(m.tactic_id, `${m.tactic_id} ${m.tactic}`), ')'))));
    }
    if (a.related_entities && a.related_entities.length) {
      const more = (a.entity_count || 0) - a.related_entities.length - (a.entity ? 1 : 0);
      out.push(h('h3', {}, more > 0 ? `Related entities (first ${a.related_entities.length}; ${count(more)} more)` : 'Related entities'),
        h('ul', {id: 'related-entities'}, a.related_entities.map((e) =>
        h('li', {class: 'mono'}, entityLink(e), ` (${e.role})`))));
    }
    const exception = exceptionSection(a);
    out.push(h('h3', {}, 'Triage'), triageForm(a, t), feedbackButtons(a, exception));
    out.push(exception.section);
    if (a.events && a.events.length) {
      out.push(h('h3', {}, `Contributing events (${a.events.length})`), h('ul', {class: 'events'},
        a.events.map((e) => h('li', {}, h('span', {class: 'muted'}, iso(e.timestamp_ns)), ' ',
          h('span', {class: 'mono'}, e.source), ' ', e.message))));
    }
    if (t.history && t.history.length) {
      out.push(h('h3', {}, 'History'), h('ol', {class: 'history'}, t.history.map((c) =>
        h('li', {}, `${iso(c.at_ns)} · ${c.status}${c.reason ? ` (${c.reason})` : ''}`
          + `${c.assignee ? ` · ${c.assignee}` : ''}${c.note ? ` · ${c.note}` : ''}`))));
    }
    return out;
  }

  function fact(name, value, cls) {
    return [h('dt', {}, name), h('dd', {class: cls}, value || '—')];
  }

  function triageForm(a, t) {
    const status = h('select', {name: 'status', 'aria-label': 'Status'},
      ['open', 'acknowledged', 'closed'].map((s) => h('option', {value: s, selected: s === t.status}, s)));
    const reason = h('select', {name: 'reason', 'aria-label': 'Closing reason'},
      h('option', {value: ''}, 'reason…'),
      REASONS.map((r) => h('option', {value: r, selected: r === t.reason}, r.replace('_', ' '))));
    const assignee = h('input', {name: 'assignee', placeholder: 'assignee', value: t.assignee || '', maxlength: 128});
    const note = h('input', {name: 'note', placeholder: 'note', maxlength: 4096});
    const result = h('span', {class: 'muted', role: 'status'}, triaged.get(a.id) || '');
    const sync = () => { reason.disabled = status.value !== 'closed'; };
    status.addEventListener('change', sync);
    sync();
    const changeOf = () => {
      const change = {status: status.value};
      if (status.value === 'closed') change.reason = reason.value || undefined;
      const who = assignee.value.trim();
      if (who !== (t.assignee || '')) change.assignee = who || null;
      if (note.value.trim()) change.note = note.value.trim();
      return change;
    };
    const failed = (e) => {
      fill(result, e.field ? `${e.field}: ${e.message}` : e.message);
      result.className = 'error';
    };
    // The same change to every alert of this detector in the current view: a rule's whole
    // sweep (its alerts and its group alert) in one step (PATCH /alerts?detector=...).
    const bulk = h('button', {type: 'button', class: 'secondary', id: 'triage-bulk',
      title: `Apply to every alert of ${a.detector} in this view`,
      on: {click: async () => {
        const q = new URLSearchParams({detector: a.detector});
        if (view) q.set('status', view);
        try {
          const done = await patch(`/alerts?${q}`, changeOf());
          const said = `${count(done.changed)} of ${count(done.matched)} alerts changed${done.truncated ? ' (more remain: apply again)' : ''}.`;
          triaged.set(a.id, said);
          fill(result, said);
          result.className = 'muted';
          load();
        } catch (e) {
          failed(e);
        }
      }}}, 'Save for all of this detector');
    const form = h('form', {class: 'triage-form', on: {submit: async (ev) => {
      ev.preventDefault();
      try {
        const updated = await patch(`/alerts/${encodeURIComponent(a.id)}`, changeOf());
        upsert(updated, false);
        render();
        showDetail(a.id, false);
      } catch (e) {
        failed(e);
      }
    }}}, status, reason, assignee, note, h('button', {type: 'submit'}, 'Save'), bulk, result);
    return form;
  }

  /** "Make an exception…": the form stays folded until asked for (or offered after a false positive). */
  function exceptionSection(a) {
    const slot = h('div', {id: 'exception-slot'});
    const open = (why) => {
      fill(slot, why && h('p', {class: 'offer'}, why), exceptionForm(a));
      button.hidden = true;
      const first = slot.querySelector('input[name=reason]');
      if (first) first.focus();
    };
    const button = h('button', {type: 'button', id: 'exception-open', on: {click: () => open()}}, 'Make an exception…');
    return {section: h('div', {class: 'exception'}, h('h3', {}, 'Exception'), button, slot), open};
  }

  function feedbackButtons(a, exception) {
    // The confirmation outlives a redraw of the detail (the alert's own update on the stream
    // redraws it, often just after the feedback that caused it).
    const result = h('span', {class: 'muted', role: 'status'}, recorded.get(a.id) || '');
    const send = (verdict) => async () => {
      try {
        await post(`/alerts/${encodeURIComponent(a.id)}/feedback`, {feedback: verdict, origin: 'dashboard'});
        const said = `Recorded as ${verdict === 'tp' ? 'true' : 'false'} positive.`;
        recorded.set(a.id, said);
        fill(result, said);
        result.className = 'muted';
        if (verdict === 'fp') {
          exception.open('A false positive lowers the detector\'s sensitivity a little. To stop alerts like this one altogether, make an exception:');
        }
      } catch (e) {
        fill(result, e.message);
        result.className = 'error';
      }
    };
    return h('div', {class: 'feedback'}, 'Detector feedback: ',
      h('button', {type: 'button', on: {click: send('tp')}}, 'True positive'),
      h('button', {type: 'button', on: {click: send('fp')}}, 'False positive'), result);
  }

  load();
  /** Offers the filter by sensor, with `names` (a fleet's console). */
  function sensors(names) {
    fill(sensorSelect, h('option', {value: ''}, 'All sensors'),
      names.map((n) => h('option', {value: n, selected: n === sensor}, n)));
    sensorSelect.hidden = names.length === 0;
  }

  return {open, sensors};
}

/** The detector by its name (a rule's title), its id beside it for searches and exceptions. */
export function detectorText(a) {
  if (!a.detector_name || a.detector_name === a.detector) return h('span', {class: 'mono'}, a.detector);
  return [a.detector_name, ' ', h('span', {class: 'muted mono small', title: 'detector id'}, a.detector)];
}

/** An entity as a link to the Entity Explorer. */
function entityLink(e) {
  return e.uuid ? h('a', {href: `#/entities/${e.uuid}`, title: 'Open in the Entity Explorer'}, entity(e)) : entity(e);
}
