// The ATT&CK Heatmap: the Enterprise matrix, one column per tactic in kill-chain order, each
// technique a rule covers coloured by how often those rules fired in the last 24 hours.
//
// Techniques no enabled rule maps to are the gaps this view exists to show: they are counted
// in every column's header and drawn, dashed and grey, when "Show gaps" is on. The matrix is
// fetched when the widget comes on the board, by Refresh, and every two minutes while it is shown
// (`/attack/coverage` has its own rate limit, 10 calls a minute by default: a timer must leave
// the analyst's own refreshes room).

import {get} from './api.js';
import {h, fill} from './dom.js';
import {count} from './format.js';

const DAY_MS = 86400000;
const REFRESH_MS = 120_000;

/** Heat class of a 24 h fire count: none, 1-9, 10-99, 100-999, 1000 and more. */
function heat(fires) {
  const n = Number(fires || 0);
  if (n <= 0) return 'heat-0';
  return `heat-${Math.min(4, Math.floor(Math.log10(n)) + 1)}`;
}

export function mountAttack(root) {
  const gaps = h('input', {type: 'checkbox', id: 'attack-gaps', on: {change: draw}});
  const refresh = h('button', {type: 'button', id: 'attack-refresh', on: {click: load}}, 'Refresh');
  const summary = h('span', {class: 'muted', id: 'attack-summary'}, '');
  const matrix = h('div', {class: 'scroll matrix', id: 'attack-matrix'});
  const legend = h('span', {class: 'legend muted'},
    'fires in 24 h:',
    [['heat-0', '0'], ['heat-1', '1+'], ['heat-2', '10+'], ['heat-3', '100+'], ['heat-4', '1000+']]
      .map(([c, label]) => h('span', {class: `swatch ${c}`}, label)),
  );
  root.append(
    h('div', {class: 'toolbar'}, refresh, h('label', {}, gaps, ' Show gaps'), summary, legend),
    matrix,
  );
  let coverage = null;
  let loads = 0;
  let started = false;

  async function load() {
    started = true;
    // The timer's answer and a Refresh's may cross: only the latest request's is drawn.
    const mine = ++loads;
    const until = new Date();
    try {
      const answer = await get('/attack/coverage', {
        since: new Date(until.getTime() - DAY_MS).toISOString(),
        until: until.toISOString(),
      });
      if (mine !== loads) return;
      coverage = answer;
      draw();
    } catch (e) {
      if (mine === loads) fill(summary, `coverage unavailable: ${e.message}`);
    }
  }

  function draw() {
    if (!coverage) return;
    const c = coverage;
    const fires = c.tactics.reduce((n, t) => n + Number(t.fires || 0), 0);
    const hits = c.tactics.reduce((n, t) => n + Number(t.ioc_hits || 0), 0);
    fill(summary, `${count(c.techniques_covered)} of ${count(c.techniques_total)} techniques covered`
      + ` · ${count(fires)} rule fires${hits ? ` and ${count(hits)} threat-intel matches` : ''} in 24 h`
      + ` · ATT&CK ${c.attack_version}`);
    fill(matrix, c.tactics.map((t) => column(t, gaps.checked)));
  }

  setInterval(() => {
    // Once the widget has loaded (or tried to), while it is shown: a failed first load is retried.
    if (started && !root.closest('[hidden]') && !document.hidden) load();
  }, REFRESH_MS);
  return {load};
}

/** Rule fires and threat-intelligence matches: what was seen of a technique. */
const seen = (t) => Number(t.fires || 0) + Number(t.ioc_hits || 0);

/**
 * Where the long words of the tactics' names may break in a narrow column (soft hyphens): a
 * browser left to itself broke "Reconnaissance" as "Reconnaiss|ance". The names are ATT&CK's
 * fixed fourteen; a word not listed breaks only where it must.
 */
const BREAKS = {Reconnaissance: 'Recon\u00adnaissance', Development: 'Develop\u00adment',
  Persistence: 'Persis\u00adtence', Escalation: 'Esca\u00adlation', Impairment: 'Impair\u00adment',
  Credential: 'Creden\u00adtial', Discovery: 'Discov\u00adery', Movement: 'Move\u00adment',
  Collection: 'Collec\u00adtion', Exfiltration: 'Exfil\u00adtration', Execution: 'Execu\u00adtion'};

function hyphenated(name) {
  return name.split(' ').map((w) => BREAKS[w] || w).join(' ');
}

function column(tactic, showGaps) {
  // A technique only a feed detects still shows: a match is a sighting.
  const shown0 = tactic.techniques.filter((t) => t.rules > 0 || t.ioc_hits > 0);
  // The busiest first: what fired is what a person looks for.
  shown0.sort((a, b) => seen(b) - seen(a) || a.id.localeCompare(b.id));
  const covered = tactic.techniques.filter((t) => t.rules > 0);
  const shown = showGaps ? shown0.concat(tactic.techniques.filter((t) => t.rules === 0 && !t.ioc_hits)) : shown0;
  const missing = tactic.techniques.length - covered.length;
  return h('section', {class: 'tactic', dataset: {id: tactic.id}},
    h('h3', {title: `${tactic.id}: ${tactic.rules} rules, ${tactic.fires} fires`
      + `${tactic.ioc_hits ? `, ${tactic.ioc_hits} threat-intel matches` : ''} in 24 h`},
    hyphenated(tactic.name),
    h('span', {class: 'muted'}, ` ${count(seen(tactic))}`)),
    h('div', {class: 'muted gapcount'}, `${covered.length} covered · ${missing} gaps`),
    shown.map((t) => cell(t)),
  );
}

function cell(t) {
  const gap = t.rules === 0 && !t.ioc_hits;
  const intel = t.ioc_hits ? `, ${t.ioc_hits} threat-intel match${t.ioc_hits === 1 ? '' : 'es'}` : '';
  const title = gap
    ? `${t.id} ${t.name}: no enabled rule`
    : `${t.id} ${t.name}: ${t.rules} rule${t.rules === 1 ? '' : 's'}`
      + `${t.rules ? ` (${t.rule_ids.join(', ')})` : ''}, ${t.fires} fires${intel} in 24 h`;
  return h('div', {class: `cell ${gap ? 'gap' : heat(seen(t))}`, title,
    dataset: {technique: t.id, fires: String(t.fires), ioc: String(t.ioc_hits || 0), rules: String(t.rules)}},
  h('span', {class: 'tid'}, t.id), h('span', {class: 'tname'}, t.name));
}
