// Fleet: the nodes of a fleet (docs/cluster.md) as this node sees them: each one's roles, its
// sensor link or its partitions and lag, its spool, its version and when it was last heard from,
// with this node's shared-content state. The tab shows only when the node is part of a fleet.

import {get} from './api.js';
import {h, fill} from './dom.js';
import {count, iso} from './format.js';

const EVERY_MS = 5000;
const NS_PER_S = 1e9;

/** Whether this node is part of a fleet, and the names of its live sensors (for filters). */
export async function fleetOf() {
  try {
    const c = await get('/cluster');
    if (c.status === 'standalone') return null;
    return {
      sensors: c.nodes.filter((n) => n.roles.includes('sensor')).map((n) => n.name).sort(),
      console: (c.roles || []).includes('console'),
    };
  } catch (e) {
    return null;
  }
}

function ago(ns, nowNs) {
  const s = Math.max(0, Math.round((nowNs - ns) / NS_PER_S));
  return s < 60 ? `${s} s ago` : s < 3600 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
}

function bytes(n) {
  const v = Number(n || 0);
  if (v >= 1 << 30) return `${(v / (1 << 30)).toFixed(1)} GiB`;
  if (v >= 1 << 20) return `${(v / (1 << 20)).toFixed(1)} MiB`;
  if (v >= 1 << 10) return `${(v / (1 << 10)).toFixed(1)} KiB`;
  return `${v} B`;
}

/** What a node is doing, in one cell: its link as a sensor, its partitions as a detector. */
function state(n) {
  const parts = [];
  if (n.link) {
    const bad = n.link !== 'connected';
    parts.push(h('span', {class: `pill ${bad ? 'pill-bad' : 'pill-ok'}`, title: 'link to the detection stream'}, n.link));
  }
  if (n.roles.includes('detector')) {
    parts.push(h('span', {class: 'muted'}, ` ${count((n.partitions || []).length)} partitions`));
  }
  return parts;
}

export function mountFleet(root) {
  const heading = h('p', {class: 'muted', id: 'fleet-summary'}, 'Loading…');
  const error = h('p', {class: 'error', role: 'alert', id: 'fleet-error', hidden: true});
  const body = h('tbody', {id: 'fleet-rows'});
  const content = h('p', {class: 'muted', id: 'fleet-content'});
  root.append(heading, error,
    h('div', {class: 'scroll'},
      h('table', {class: 'rows', id: 'fleet-table'},
        h('thead', {}, h('tr', {}, ['Node', 'Roles', 'State', 'Lag', 'Spool', 'Version', 'Last contact']
          .map((c) => h('th', {scope: 'col'}, c)))),
        body)),
    content);
  let timer = null;

  async function load() {
    let c;
    try {
      c = await get('/cluster');
      error.hidden = true;
    } catch (e) {
      error.hidden = false;
      fill(error, `Could not load the fleet: ${e.message}`);
      return;
    }
    const nowNs = Date.now() * 1e6;
    const owned = c.nodes.reduce((n, x) => n + (x.partitions || []).length, 0);
    fill(heading, `${count(c.nodes.length)} nodes live · ${count(owned)} partitions owned · connected to `
      + `${c.server || 'no server'} (${(c.servers || []).length} configured)`
      + (c.last_error ? ` · ${c.last_error}` : ''));
    heading.className = c.status === 'ok' ? 'muted' : 'error';
    fill(body, c.nodes.map((n) => h('tr', {dataset: {node: n.name}, class: n.this_node ? 'selected' : ''},
      h('td', {class: 'mono'}, n.name, n.this_node ? h('span', {class: 'muted'}, ' (this node)') : null),
      h('td', {}, n.roles.join(', ')),
      h('td', {}, state(n)),
      h('td', {title: 'records of its partitions in the stream not yet scored'},
        n.roles.includes('detector') ? count(n.pending) : '—'),
      h('td', {}, n.roles.includes('sensor') ? bytes(n.spool_bytes) : '—'),
      h('td', {class: 'muted'}, n.version),
      h('td', {title: iso(n.last_contact_ns)}, ago(n.last_contact_ns, nowNs)))));
    const s = c.content;
    if (s) {
      fill(content, `Shared content: ${s.role === 'source' ? 'this console writes it' : 'this node follows the console'}`
        + ` · revision ${count(s.revision)} · ${count(s.changes)} changes · ${count(s.errors)} errors`
        + (s.last_error ? ` (last: ${s.last_error})` : ''));
      content.className = s.errors ? 'error' : 'muted';
    }
  }

  return {
    load() {
      load();
      if (!timer) timer = setInterval(() => { if (!root.closest('[hidden]')) load(); }, EVERY_MS);
    },
  };
}
