// The Live Event Stream: a tail of stored events from the WebSocket, filtered on the server by
// the stream's filter frame (minimum severity, sources, entity).
//
// The stream only carries what arrives from now on: a page opened during a lull, or a filter
// just applied, would show nothing for as long as nothing new matches. So the newest stored
// events that the filter selects are read from `GET /events` first (the backfill), and live ones
// go on top of them, each event once. The empty state names the inputs as this service has them
// configured (`GET /config`), not the default ports.

import {get} from './api.js';
import {h, fill} from './dom.js';
import {clock, count, iso, partialText, severityBadge, severityName} from './format.js';

const KEEP = 300;
/** Events read back from the store when the page opens and when a filter is applied. */
const BACKFILL = 50;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function mountEvents(root, stream) {
  const rows = [];
  /** Ids of the events in `rows`: a backfilled event the stream also brings shows once. */
  const ids = new Set();
  let paused = false;
  let seen = 0;
  let sampled = 0;
  let hint = 'Send logs to the syslog input, JSON lines or POST /api/v1/ingest';
  let backfills = 0;

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
    ids.clear();
    render();
    stream.sendFilter(filter);
    backfill(filter);
  }}}, sev, sources, entity, h('button', {type: 'submit'}, 'Apply'), pause, problem);

  root.append(form, h('div', {class: 'toolbar'}, summary),
    h('div', {class: 'scroll'},
      h('table', {class: 'rows'},
        h('thead', {}, h('tr', {}, ['Time', 'Sev', 'Source', 'Host', 'Message']
          .map((c) => h('th', {scope: 'col'}, c)))),
        body)));

  function add(events, matched) {
    for (const e of events) {
      if (e.id && ids.has(e.id)) continue;
      if (e.id) ids.add(e.id);
      rows.unshift(e);
    }
    trim();
    seen += matched;
    sampled += matched - events.length;
    if (!paused) render();
  }

  function trim() {
    while (rows.length > KEEP) {
      const gone = rows.pop();
      if (gone.id) ids.delete(gone.id);
    }
  }

  /**
   * The newest stored events `filter` selects, under whatever the stream has brought meanwhile
   * (newest first, each once). The API filters by one source at a time: a list is read source
   * by source and merged by time.
   */
  async function backfill(filter) {
    const mine = ++backfills;
    const base = {limit: BACKFILL, severity: filter.min_severity || undefined, entity: filter.entity};
    const sourcesWanted = filter.source && filter.source.length ? filter.source.slice(0, 8) : [undefined];
    let found = [];
    try {
      for (const source of sourcesWanted) {
        const page = await get('/events', {...base, source});
        found = found.concat(page.items);
        if (mine === backfills) fill(problem, partialText(page.meta.sensors));
      }
    } catch (e) {
      if (mine === backfills) fill(problem, `the newest stored events could not be read: ${e.message}`);
      return;
    }
    if (mine !== backfills) return;
    found.sort((a, b) => Number(b.timestamp_ns) - Number(a.timestamp_ns));
    for (const e of found.slice(0, BACKFILL)) {
      if (e.id && ids.has(e.id)) continue;
      if (e.id) ids.add(e.id);
      rows.push(e);
    }
    trim();
    if (!paused) render();
  }

  /** Where this service takes logs, from its configuration. */
  async function describeInputs() {
    try {
      const c = await get('/config');
      const i = c.inputs || {};
      const parts = [];
      if (i.syslog_udp && i.syslog_udp.enabled) parts.push(`syslog over UDP to ${i.syslog_udp.address}`);
      if (i.syslog_tcp && i.syslog_tcp.enabled) parts.push(`syslog over TCP to ${i.syslog_tcp.address}`);
      if (i.json_tcp && i.json_tcp.enabled) parts.push(`JSON lines over TCP to ${i.json_tcp.address}`);
      if (i.relp && i.relp.enabled) parts.push(`RELP to ${i.relp.address}`);
      if (i.http && i.http.enabled) parts.push(`POST ${location.origin}/api/v1/ingest`);
      if (i.file && i.file.enabled && (i.file.paths || []).length) parts.push(`lines appended to ${i.file.paths.join(', ')}`);
      hint = parts.length ? `Send logs: ${parts.join('; ')}` : 'Every input is disabled in this service\'s configuration';
      render();
    } catch {
      // The generic hint stays.
    }
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
      + (rows.length ? '' : `: no stored event matches yet. ${hint}; under a filter only matching events show.`));
  }

  stream.on('event', (f) => add([f.event], 1));
  stream.on('batch', (f) => add(f.events, Math.max(f.matched || 0, f.events.length)));
  stream.on('error', (f) => fill(problem, f.message || f.error));
  // A reconnect after an outage reads back what it missed, under the filter in force.
  stream.on('state', ({state}) => { if (state === 'open') backfill(stream.filter || {}); });
  render();
  describeInputs();
}
