// The Live Event Stream: a tail of stored events from the WebSocket, filtered on the server by
// the stream's filter frame (minimum severity, sources, entity).

import {h, fill} from './dom.js';
import {clock, count, iso, severityBadge, severityName} from './format.js';

const KEEP = 300;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function mountEvents(root, stream) {
  const rows = [];
  let paused = false;
  let seen = 0;
  let sampled = 0;

  const sev = h('select', {id: 'event-severity', 'aria-label': 'Minimum severity'},
    [0, 1, 2, 3, 4, 5].map((s) => h('option', {value: s}, `≥ ${severityName(s)}`)));
  const sources = h('input', {id: 'event-sources', placeholder: 'sources (sshd, nginx.access)', size: 24});
  const entity = h('input', {id: 'event-entity', placeholder: 'entity UUID', size: 24});
  const problem = h('span', {class: 'error', role: 'status', id: 'event-filter-error'});
  const pause = h('button', {type: 'button', id: 'event-pause', 'aria-pressed': 'false',
    on: {click: () => {
      paused = !paused;
      pause.setAttribute('aria-pressed', String(paused));
      fill(pause, paused ? 'Resume' : 'Pause');
      if (!paused) render();
    }}}, 'Pause');
  const summary = h('span', {class: 'muted', id: 'event-summary'});
  const body = h('tbody', {id: 'event-rows'});

  const form = h('form', {class: 'toolbar', on: {submit: (ev) => {
    ev.preventDefault();
    const filter = {};
    if (Number(sev.value) > 0) filter.min_severity = Number(sev.value);
    const list = sources.value.split(',').map((s) => s.trim()).filter(Boolean);
    if (list.length) filter.source = list;
    const e = entity.value.trim();
    if (e && !UUID.test(e)) {
      fill(problem, 'entity: a UUID, as the API gives entities');
      return;
    }
    if (e) filter.entity = e;
    fill(problem);
    rows.length = 0;
    render();
    stream.sendFilter(filter);
  }}}, sev, sources, entity, h('button', {type: 'submit'}, 'Apply'), pause, problem);

  root.append(form, h('div', {class: 'toolbar'}, summary),
    h('div', {class: 'scroll'},
      h('table', {class: 'rows'},
        h('thead', {}, h('tr', {}, ['Time', 'Sev', 'Source', 'Host', 'Message']
          .map((c) => h('th', {scope: 'col'}, c)))),
        body)));

  function add(events, matched) {
    for (const e of events) rows.unshift(e);
    rows.length = Math.min(rows.length, KEEP);
    seen += matched;
    sampled += matched - events.length;
    if (!paused) render();
  }

  function render() {
    fill(body, rows.map((e) => h('tr', {},
      h('td', {class: 'nowrap', title: iso(e.timestamp_ns)}, clock(e.timestamp_ns)),
      h('td', {}, severityBadge(e.severity)),
      h('td', {class: 'mono nowrap'}, e.source),
      h('td', {class: 'mono nowrap'}, e.host || ''),
      h('td', {class: 'message'}, e.message))));
    fill(summary, `${count(seen)} received` + (sampled ? `, ${count(sampled)} not shown (sampled at high rates)` : '')
      + (paused ? ' · paused' : '')
      + (rows.length ? '' : ': waiting for events. Send logs to the syslog input (TCP or UDP 5514), JSON '
        + 'lines (TCP 5515) or POST /api/v1/ingest; under a filter only matching events show.'));
  }

  stream.on('event', (f) => add([f.event], 1));
  stream.on('batch', (f) => add(f.events, Math.max(f.matched || 0, f.events.length)));
  stream.on('error', (f) => fill(problem, f.message || f.error));
  render();
}
