// The Entity Explorer: find an entity (an address, a user, a host, a domain), then see who it
// deals with and what it did. The graph puts the entity among the entities its events name and
// the alerts that join them; clicking an entity expands it and makes it the one shown; clicking an
// alert opens the alert detail. Beside the graph: the UEBA baseline (hours active as a 24-hour
// strip, top source addresses, top templates by weight, volume, or the warm-up's progress), the
// risk history of the last 7 days, and the entity's events across sources.
//
// Everything comes from the public API: `/entities/search`, `/entities/{uuid}/timeline`,
// `/risk-history`, `/baseline`, and `/alerts?entity=`.

import {failure, get} from './api.js';
import {fill, h} from './dom.js';
import {axisColours, clock, count, iso, partialText, severityBadge, themed} from './format.js';

import cytoscape from './cytoscape.js';
import uPlot from './uplot.js';

/** Time of day for today's events, with the date for older ones (an entity's span is days). */
function when(ns) {
  const d = new Date(Number(ns) / 1e6);
  if (d.toDateString() === new Date().toDateString()) return clock(ns);
  return `${d.toLocaleDateString([], {month: 'short', day: 'numeric'})} ${clock(ns)}`;
}

/** Related entities drawn per expanded entity, most events shared first. */
const NEIGHBOURS = 12;
/** Alerts drawn per expanded entity, newest first. */
const ALERTS = 12;
/** Nodes in the graph at most: past it, an expansion says how many it left out. */
const MAX_NODES = 120;
const EVENTS = 100;
const KIND_COLOURS = {ip: '#388bfd', user: '#3fb950', host: '#a371f7', domain: '#d29922'};
const SEVERITY_COLOURS = ['#6e7681', '#388bfd', '#3fb950', '#d29922', '#f0883e', '#f85149'];

export function mountEntities(root, {onAlert, onShow} = {}) {
  const state = {uuid: null, entity: null, graph: null, expanded: new Set(), request: 0, risk: null};
  /** A message per template id, from the entity's events: what a baseline's template looks like. */
  const examples = new Map();
  const query = h('input', {type: 'search', id: 'entity-q', placeholder: 'Address, user, host or domain (or a UUID)',
    'aria-label': 'Search entities', autocomplete: 'off'});
  const form = h('form', {class: 'toolbar', on: {submit: (e) => {
    e.preventDefault();
    search();
  }}}, query, h('button', {type: 'submit'}, 'Search'));
  const results = h('div', {id: 'entity-results', class: 'entity-results'});
  const heading = h('div', {id: 'entity-heading', class: 'entity-heading'},
    h('p', {class: 'muted'}, 'Search for an address, an account, a host or a domain, or open one '
      + 'from an alert: its graph, baseline, risk history and events show here.'));
  const graphBox = h('div', {id: 'entity-graph', class: 'entity-graph', 'aria-label':
    'Entity graph: entities as circles, alerts as diamonds; click an entity to expand it, an alert to open it'});
  const graphNote = h('p', {class: 'muted', id: 'entity-graph-note'});
  const graphList = h('details', {class: 'graph-list', id: 'entity-graph-list'});
  const baseline = h('section', {id: 'entity-baseline', class: 'entity-card', 'aria-live': 'polite'});
  const risk = h('section', {id: 'entity-risk', class: 'entity-card'});
  const events = h('section', {id: 'entity-events', class: 'entity-card'});
  const body = h('div', {class: 'entity-body', hidden: true},
    h('section', {class: 'entity-card entity-graph-card'},
      h('h3', {}, 'Graph ', h('span', {class: 'muted'}, '(click an entity to expand it, an alert to open it)')),
      graphBox, graphNote, legend(), graphList),
    baseline, risk, events);
  root.append(form, results, heading, body);
  suggest();

  /** Until an entity is chosen: the entities of the newest alerts, one click away. */
  async function suggest() {
    try {
      const recent = await get('/alerts', {limit: 20});
      const seen = new Map();
      for (const a of recent.items) {
        for (const e of [a.entity, ...(a.related_entities || [])]) {
          if (e && e.uuid && !seen.has(e.uuid) && seen.size < 12) seen.set(e.uuid, e);
        }
      }
      if (!seen.size || state.uuid) return;
      heading.append(h('p', {class: 'chips', id: 'entity-suggestions'}, h('span', {class: 'muted'}, 'In the newest alerts: '),
        [...seen.values()].map((e) => h('a', {href: `#/entities/${e.uuid}`, class: 'chip'}, kindBadge(e.kind), e.value))));
    } catch {
      // Only a shortcut: the search works without it.
    }
  }

  let searches = 0;
  async function search() {
    const q = query.value.trim();
    if (!q) return;
    fill(results, h('p', {class: 'muted'}, 'Searching…'));
    // A newer search, or an entity opened meanwhile (a link, the graph), wins over this answer.
    const mine = ++searches;
    const shown = state.request;
    try {
      const found = await get('/entities/search', {q, limit: 20});
      if (mine !== searches || shown !== state.request) return;
      if (!found.items.length) {
        fill(results, h('p', {class: 'muted'}, `No entity named like “${q}”. Names are canonical: `
          + 'lower-case hosts and domains, addresses as written (docs/entities.md).'));
        return;
      }
      if (found.items.length === 1 || found.items[0].relevance === 1) {
        fill(results);
        show(found.items[0].uuid);
        return;
      }
      fill(results, h('table', {class: 'rows'},
        h('thead', {}, h('tr', {}, h('th', {}, 'Kind'), h('th', {}, 'Name'), h('th', {}, 'First seen'),
          h('th', {class: 'num'}, 'Match'))),
        h('tbody', {id: 'entity-result-rows'}, found.items.map((e) => h('tr', {tabindex: 0, class: 'clickable',
          dataset: {uuid: e.uuid},
          on: {click: () => { fill(results); show(e.uuid); },
            keydown: (ev) => { if (ev.key === 'Enter') { fill(results); show(e.uuid); } }}},
        h('td', {}, kindBadge(e.kind)), h('td', {class: 'mono'}, e.value),
        h('td', {title: iso(e.first_seen_ns)}, e.first_seen_ns ? new Date(Number(e.first_seen_ns) / 1e6).toLocaleString() : '—'),
        h('td', {class: 'num'}, e.relevance.toFixed(1)))))),
      found.meta.total > found.items.length
        ? h('p', {class: 'muted'}, `${count(found.meta.total - found.items.length)} more: refine the search.`) : null);
    } catch (e) {
      if (mine === searches) fill(results, h('p', {class: 'error'}, failure('Search failed', e)));
    }
  }

  /** Shows entity `uuid`: a fresh graph around it and its panels. */
  async function show(uuid, {keepGraph = false} = {}) {
    const request = ++state.request;
    state.uuid = uuid;
    if (onShow) onShow(uuid);
    body.hidden = false;
    fill(heading, h('p', {class: 'muted'}, 'Loading…'));
    let timeline;
    try {
      timeline = await get(`/entities/${encodeURIComponent(uuid)}/timeline`, {limit: EVENTS});
    } catch (e) {
      if (request !== state.request) return;
      fill(heading, h('p', {class: 'error'}, e.status === 404
        ? `No entity ${uuid}: it was never seen, or its events have aged out.` : failure('The entity could not be loaded', e)));
      body.hidden = true;
      return;
    }
    if (request !== state.request) return;
    state.entity = timeline.entity;
    const ent = timeline.entity;
    fill(heading, h('h3', {id: 'entity-title'}, kindBadge(ent.kind), ' ', h('span', {class: 'mono'}, ent.value)),
      h('p', {class: 'muted'}, h('span', {class: 'mono'}, ent.uuid),
        ent.first_seen_ns ? ` · first seen ${new Date(Number(ent.first_seen_ns) / 1e6).toLocaleString()}` : '',
        ` · ${count(timeline.total)}${timeline.total_exact === false ? '+' : ''} events`,
        ' · ', h('a', {href: `#/entities/${ent.uuid}`}, 'link to this view')),
      partialText(timeline.sensors) ? h('p', {class: 'error', id: 'entity-partial'}, partialText(timeline.sensors)) : null);
    if (!keepGraph || !state.graph) resetGraph();
    expand(ent, timeline);
    showEvents(timeline);
    showBaseline(uuid, request);
    showRisk(uuid, request);
  }

  function resetGraph() {
    if (state.graph) state.graph.destroy();
    state.expanded = new Set();
    state.graph = cytoscape({
      container: graphBox,
      minZoom: 0.3, maxZoom: 3, wheelSensitivity: 0.3,
      style: graphStyle(),
    });
    // The canvas has no element per node: the instance is reachable from its container for the
    // browser test and the console, and the list below the graph serves the keyboard.
    graphBox.cytoscape = state.graph;
    state.graph.on('tap', 'node.entity', (ev) => {
      const uuid = ev.target.id();
      if (uuid !== state.uuid) show(uuid, {keepGraph: true});
    });
    state.graph.on('tap', 'node.alert', (ev) => onAlert && onAlert(ev.target.data('alert')));
    // An alert's title shows while the pointer is on it: forty titles at once were unreadable.
    state.graph.on('mouseover', 'node.alert', (ev) => ev.target.addClass('hover'));
    state.graph.on('mouseout', 'node.alert', (ev) => ev.target.removeClass('hover'));
  }

  /** Adds `ent`'s neighbours and alerts to the graph, and lays it out again. */
  async function expand(ent, timeline) {
    const cy = state.graph;
    let left = 0;
    const add = (element) => {
      if (cy.getElementById(element.data.id).nonempty()) return true;
      if (element.group === 'nodes' && cy.nodes().length >= MAX_NODES) {
        left += 1;
        return false;
      }
      cy.add(element);
      return true;
    };
    add(entityNode(ent));
    cy.nodes().removeClass('focus');
    cy.getElementById(ent.uuid).addClass('focus expanded');
    if (!state.expanded.has(ent.uuid)) {
      const top = Math.max(1, ...timeline.related_entities.map((r) => r.events));
      for (const r of timeline.related_entities.slice(0, NEIGHBOURS)) {
        if (add(entityNode(r))) {
          add({group: 'edges', data: {id: `${ent.uuid}~${r.uuid}`, source: ent.uuid, target: r.uuid,
            label: `${count(r.events)}`, width: 1 + 3 * (r.events / top)}});
        }
      }
      const request = state.request;
      try {
        const alerts = await get('/alerts', {entity: ent.uuid, limit: ALERTS});
        if (state.graph !== cy) return;
        // Marked only once its alerts are in: a failed load is tried again on the next click.
        state.expanded.add(ent.uuid);
        for (const a of alerts.items) {
          if (!add({group: 'nodes', classes: 'alert', data: {id: `alert:${a.id}`, alert: a.id,
            label: a.title, colour: SEVERITY_COLOURS[a.severity] || SEVERITY_COLOURS[0]}})) continue;
          // The alert joins every entity it names that the graph holds (and its own entity).
          const named = [a.entity, ...(a.related_entities || [])].filter(Boolean);
          for (const e of named) {
            if (e.uuid !== ent.uuid && cy.getElementById(e.uuid).empty()) add(entityNode(e));
            if (cy.getElementById(e.uuid).nonempty()) {
              add({group: 'edges', classes: 'joins', data: {id: `alert:${a.id}~${e.uuid}`,
                source: `alert:${a.id}`, target: e.uuid, label: '', width: 1}});
            }
          }
          add({group: 'edges', classes: 'joins', data: {id: `alert:${a.id}~${ent.uuid}`,
            source: `alert:${a.id}`, target: ent.uuid, label: '', width: 1}});
        }
        if (request !== state.request) {
          // Another entity is shown by now: its own expansion says what it left out.
        } else if (alerts.meta.total > alerts.items.length) {
          fill(graphNote, `${count(alerts.meta.total - alerts.items.length)} older alerts name it and are not drawn.`);
        } else {
          fill(graphNote);
        }
      } catch (e) {
        if (request === state.request) {
          fill(graphNote, h('span', {class: 'error'}, failure('Its alerts could not be loaded', e)));
        }
      }
    }
    if (left) graphNote.append(` ${count(left)} nodes left out (the graph holds ${MAX_NODES}).`);
    listGraph();
    // Labels count in the layout's room for each node, so that names do not overlap.
    cy.layout({name: 'cose', animate: false, randomize: false, nodeDimensionsIncludeLabels: true,
      nodeRepulsion: () => 24000, idealEdgeLength: () => 90, nodeOverlap: 12, componentSpacing: 60,
      padding: 24}).run();
    cy.fit(undefined, 24);
  }

  function showEvents(timeline) {
    for (const e of timeline.events) if (e.template_id && !examples.has(e.template_id)) examples.set(e.template_id, e.message);
    const sources = Object.entries(timeline.sources || {}).sort((a, b) => b[1] - a[1]);
    fill(events, h('h3', {}, 'Events across sources ',
      h('span', {class: 'muted'}, `(newest ${count(timeline.events.length)} of ${count(timeline.total)}${timeline.total_exact === false ? '+' : ''})`)),
    h('p', {class: 'chips'}, sources.map(([s, n]) => h('span', {class: 'chip'}, `${s} `, h('b', {}, count(n))))),
    timeline.events.length
      ? h('div', {class: 'scroll entity-events-list'}, h('table', {class: 'rows'},
        h('tbody', {id: 'entity-event-rows'}, timeline.events.map((e) => h('tr', {},
          h('td', {class: 'nowrap', title: iso(e.timestamp_ns)}, when(e.timestamp_ns)),
          h('td', {}, severityBadge(e.severity)), h('td', {class: 'nowrap'}, e.source),
          h('td', {class: 'message'}, e.message))))))
      : h('p', {class: 'muted'}, 'No stored event names it (they may have aged out).'));
  }

  async function showBaseline(uuid, request) {
    fill(baseline, h('h3', {}, 'UEBA baseline'), h('p', {class: 'muted'}, 'Loading…'));
    let b;
    try {
      b = await get(`/entities/${encodeURIComponent(uuid)}/baseline`);
    } catch (e) {
      if (request !== state.request) return;
      fill(baseline, h('h3', {}, 'UEBA baseline'), baselineProblem(e));
      return;
    }
    if (request !== state.request) return;
    const hours = new Set(b.hours_active);
    // Weights are the templates' (decayed) counts: shown as shares of those listed.
    const total = b.top_templates.reduce((n, t) => n + t.weight, 0) || 1;
    const top = Math.max(1e-9, ...b.top_templates.map((t) => t.weight / total));
    fill(baseline, h('h3', {}, 'UEBA baseline'),
      h('dl', {class: 'facts'},
        h('dt', {}, 'Events learnt'), h('dd', {}, count(b.event_count)),
        h('dt', {}, 'Volume'), h('dd', {}, `${b.volume_ema_minute.toFixed(2)} events a minute (moving average)`),
        h('dt', {}, 'Profiled since'), h('dd', {title: iso(b.first_seen_ns)}, new Date(Number(b.first_seen_ns) / 1e6).toLocaleString())),
      h('h4', {}, 'Hours active (UTC)'),
      h('div', {class: 'hours', id: 'entity-hours', role: 'img',
        'aria-label': `Active at ${b.hours_active.length ? b.hours_active.join(', ') : 'no hour yet'} UTC`},
      Array.from({length: 24}, (_, hr) => h('span', {class: hours.has(hr) ? 'on' : '', title: `${hr}:00 UTC${hours.has(hr) ? ': usual' : ''}`},
        hr % 6 === 0 ? String(hr) : ''))),
      h('h4', {}, b.entity_type === 'ip' ? 'Hosts it reached' : 'Top source addresses'),
      b.top_source_ips.length
        ? h('p', {class: 'chips'}, b.top_source_ips.map((ip) => h('span', {class: 'chip mono'}, ip)))
        : h('p', {class: 'muted'}, 'None recorded.'),
      h('h4', {}, 'Top templates'),
      b.top_templates.length ? h('ul', {class: 'bars', id: 'entity-templates'}, b.top_templates.slice(0, 10).map((t) => h('li', {},
        h('span', {class: 'mono', title: examples.get(t.template_id) || ''}, t.template_id),
        h('meter', {min: 0, max: top, value: t.weight / total}),
        h('span', {class: 'num'}, `${(100 * t.weight / total).toFixed(1)} %`))))
        : h('p', {class: 'muted'}, 'None yet.'));
  }

  async function showRisk(uuid, request) {
    fill(risk, h('h3', {}, 'Risk history ', h('span', {class: 'muted'}, '(highest UEBA score per hour, 7 days)')));
    let r;
    try {
      r = await get(`/entities/${encodeURIComponent(uuid)}/risk-history`, {range: '7d'});
    } catch (e) {
      if (request !== state.request) return;
      risk.append(h('p', {class: e.status === 503 ? 'muted' : 'error'}, failure('The risk history could not be loaded', e)));
      return;
    }
    if (request !== state.request) return;
    if (!r.points.length) {
      risk.append(h('p', {class: 'muted', id: 'entity-risk-empty'}, 'Not scored in the last 7 days: an entity is scored once its '
        + 'baseline has warmed up (see the baseline beside).'));
      return;
    }
    const box = h('div', {id: 'entity-risk-chart'});
    risk.append(box);
    const now = Date.now() / 1000;
    const xs = r.points.map((p) => Number(p.ts_ns) / 1e9 + 1800);
    const ys = r.points.map((p) => p.max_score);
    if (state.risk) state.risk.destroy();
    state.risk = new uPlot({
      width: Math.max(300, risk.clientWidth - 24), height: 140,
      legend: {live: true},
      // Scores far below an alert's read as a flat line on 0-1: the axis follows the data.
      scales: {x: {time: true, range: () => [now - 7 * 86400, now]},
        y: {range: [0, Math.min(1, Math.max(0.05, ...ys) * 1.2)]}},
      axes: [
        {...axisColours()},
        {...axisColours(), size: 48},
      ],
      series: [
        {label: 'hour', value: (u, v) => (v == null ? '' : hourLabel(v - 1800))},
        {label: 'highest score', stroke: '#f85149', fill: 'rgba(248,81,73,.35)', points: {show: false},
          paths: uPlot.paths.bars({size: [0.9, 8]}), value: (u, v) => (v == null ? '-' : v.toFixed(3))},
      ],
    }, [xs, ys], box);
  }

  /** The graph as a list of buttons, for the keyboard and screen readers. */
  function listGraph() {
    const cy = state.graph;
    fill(graphList, h('summary', {}, `The graph as a list (${cy.nodes('.entity').length} entities, `
      + `${cy.nodes('.alert').length} alerts)`),
    h('ul', {class: 'plain'}, cy.nodes().map((n) => h('li', {}, n.hasClass('alert')
      ? h('button', {type: 'button', class: 'link', on: {click: () => onAlert && onAlert(n.data('alert'))}}, `◆ ${n.data('label')}`)
      : h('button', {type: 'button', class: 'link', dataset: {uuid: n.id()},
        on: {click: () => n.id() !== state.uuid && show(n.id(), {keepGraph: true})}}, n.data('label'))))));
  }

  // A theme change recolours the graph's labels and lines and redraws the risk chart.
  window.addEventListener('themechange', () => {
    if (state.graph) state.graph.style(graphStyle());
    if (state.uuid && !body.hidden) showRisk(state.uuid, state.request);
  });

  function entityNode(e) {
    return {group: 'nodes', classes: 'entity', data: {id: e.uuid, label: `${e.kind}:${e.value}`,
      colour: KIND_COLOURS[e.kind] || '#8b949e'}};
  }

  return {show, search: (q) => { query.value = q; search(); }};
}

/** The graph's look, in the current theme's colours. */
function graphStyle() {
  const text = themed('--text');
  const muted = themed('--muted');
  return [
    {selector: 'node', style: {'label': 'data(label)', 'color': text, 'font-size': 10,
      'text-valign': 'bottom', 'text-margin-y': 4, 'text-wrap': 'ellipsis', 'text-max-width': 120,
      'min-zoomed-font-size': 6,
      'background-color': 'data(colour)', 'width': 18, 'height': 18, 'border-width': 0}},
    {selector: 'node.entity.expanded', style: {'border-width': 2, 'border-color': text}},
    {selector: 'node.focus', style: {'width': 30, 'height': 30, 'border-width': 3,
      'border-color': themed('--accent'), 'font-weight': 'bold'}},
    {selector: 'node.alert', style: {'shape': 'diamond', 'width': 16, 'height': 16, 'font-size': 9,
      'color': muted, 'label': ''}},
    {selector: 'node.alert.hover', style: {'label': 'data(label)', 'z-index': 10, 'text-background-color':
      themed('--panel'), 'text-background-opacity': 0.9, 'text-background-padding': 2}},
    {selector: 'edge', style: {'width': 'data(width)', 'line-color': themed('--line'), 'curve-style': 'bezier',
      'label': 'data(label)', 'font-size': 8, 'color': muted, 'text-rotation': 'autorotate'}},
    {selector: 'edge.joins', style: {'line-color': '#b5470f', 'line-style': 'dashed', 'width': 1}},
  ];
}

function baselineProblem(e) {
  const b = e.body || {};
  if (e.status === 503 && e.code === 'ueba_disabled') {
    return h('p', {class: 'muted', id: 'entity-baseline-off'}, 'UEBA is off on this service (`ueba.enabled = false` '
      + 'in the configuration): baselines keep learning but are not served, and no UEBA alert is raised.');
  }
  if (e.status === 404 && b.status === 'warming_up') {
    const days = Number(b.warmup_days) || 0;
    const daysLeft = Math.max(0, Number(b.seconds_remaining) || 0) / 86400;
    return h('div', {id: 'entity-warmup'},
      h('p', {}, 'Still learning what is normal: it is scored, and can alert, once it has both '
        + `${count(b.warmup_min_events)} events and ${days} days of event time.`),
      h('label', {}, `Events: ${count(b.event_count)} of ${count(b.warmup_min_events)}`,
        h('meter', {min: 0, max: b.warmup_min_events, value: Math.min(b.event_count, b.warmup_min_events)})),
      h('label', {}, `Time: ${(days - daysLeft).toFixed(1)} of ${days} days`,
        h('meter', {min: 0, max: days, value: Math.max(0, days - daysLeft)})));
  }
  if (e.status === 404) {
    return h('p', {class: 'muted'}, 'No baseline: domains are not profiled, and the coldest entities are '
      + 'forgotten past `ueba.max_entities`.');
  }
  return h('p', {class: 'error'}, failure('The baseline could not be loaded', e));
}

function kindBadge(kind) {
  return h('span', {class: 'kind', dataset: {kind}}, kind);
}

function legend() {
  return h('p', {class: 'graph-legend muted'},
    Object.entries(KIND_COLOURS).map(([k]) => h('span', {class: 'kind', dataset: {kind: k}}, k)),
    h('span', {class: 'kind alert-kind'}, '◆ alert (colour: severity; its title on hover)'),
    ' · edge label: events shared');
}

function hourLabel(seconds) {
  const d = new Date(seconds * 1000);
  return `${d.toLocaleString([], {hour12: false, month: 'short', day: 'numeric', hour: '2-digit',
    minute: '2-digit'})} (${d.toISOString().slice(11, 16)} UTC)`;
}

