// The Sigma Rules catalogue: every loaded rule with its level, source, ATT&CK mapping and 24-hour
// trend; turning a rule off or on; the rule's YAML, highlighted; and the editor that uploads a
// custom rule, with a dry run first and validation errors shown at their line and column.
//
// The list is one page of `GET /sigma/rules` (filters and search run on the server). A rule's
// trend is fetched only when it fired in the last 24 hours: the list already says how often, and
// a flat line needs no request (the timeline endpoint counts against the detail rate limit).

import {failure, get, patch, post} from './api.js';
import {debounce, fill, h} from './dom.js';
import {attackUrl, axisColours, count, partialText, severityBadge} from './format.js';
import uPlot from './uplot.js';

const PAGE = 50;
const LEVELS = ['informational', 'low', 'medium', 'high', 'critical'];
const SOURCES = {bundled: 'Bundled', directory: 'Rule folders', custom: 'Uploaded'};
/** A new rule to start from, with an id of its own. */
const template = () => `title: My rule
id: ${uuid()}
status: experimental
description: What it finds and why it matters.
logsource:
  product: linux
  service: sshd
detection:
  selection:
    message|contains: 'Failed password for root'
  condition: selection
level: medium
tags:
  - attack.credential-access
  - attack.t1110.001
`;

export function mountRules(root) {
  const state = {page: 1, selected: null};
  const search = h('input', {type: 'search', id: 'rules-q', placeholder: 'Search id, title, tag…',
    'aria-label': 'Search rules', on: {input: debounce(() => reload(), 300)}});
  const level = select('rules-level', 'Level', [['', 'Any level'], ...LEVELS.map((l) => [l, l])]);
  const enabled = select('rules-enabled', 'State',
    [['', 'Enabled and disabled'], ['true', 'Enabled'], ['false', 'Disabled']]);
  const source = select('rules-source', 'Source',
    [['', 'Any source'], ...Object.entries(SOURCES)]);
  const tactic = h('input', {type: 'text', id: 'rules-tactic', placeholder: 'Tactic (TA0006, Execution…)',
    'aria-label': 'ATT&CK tactic', on: {change: () => reload()}});
  for (const s of [level, enabled, source]) s.addEventListener('change', () => reload());
  const upload = h('button', {type: 'button', id: 'rules-upload', on: {click: () => openEditor()}},
    'Upload rule…');
  const summary = h('span', {class: 'muted', id: 'rules-total'});
  const rows = h('tbody', {id: 'rules-rows'});
  const message = h('p', {class: 'muted', id: 'rules-message'}, 'Loading…');
  const prev = h('button', {type: 'button', id: 'rules-prev', on: {click: () => turn(-1)}}, '‹ Previous');
  const next = h('button', {type: 'button', id: 'rules-next', on: {click: () => turn(1)}}, 'Next ›');
  const pageInfo = h('span', {class: 'muted'});
  const detail = h('section', {class: 'rule-detail', id: 'rule-detail', 'aria-live': 'polite'},
    h('p', {class: 'muted'}, 'Select a rule to see its YAML, its 24-hour trend and its ATT&CK '
      + 'mapping, or upload a rule of your own.'));

  root.append(
    h('div', {class: 'toolbar'}, search, level, enabled, source, tactic, upload, summary),
    h('div', {class: 'split'},
      h('div', {class: 'scroll'},
        h('table', {class: 'rows', id: 'rules-table'},
          h('thead', {}, h('tr', {},
            h('th', {title: 'Enabled'}, 'On'), h('th', {}, 'Level'), h('th', {}, 'Rule'),
            h('th', {}, 'ATT&CK'), h('th', {class: 'num'}, 'Fires 24 h'))),
          rows),
        message,
        h('div', {class: 'toolbar pager'}, prev, pageInfo, next)),
      h('div', {class: 'scroll'}, detail)),
  );

  let request = 0;
  async function load() {
    const mine = ++request;
    try {
      const res = await get('/sigma/rules', {
        q: search.value.trim(), level: level.value, enabled: enabled.value, source: source.value,
        tactic: tactic.value.trim(), page: state.page, limit: PAGE,
      });
      if (mine !== request) return;
      fill(summary, `${count(res.meta.total)} rule${res.meta.total === 1 ? '' : 's'}`);
      fill(rows, res.items.map(row));
      const pages = Math.max(1, Math.ceil(res.meta.total / PAGE));
      fill(pageInfo, `page ${state.page} of ${pages}`);
      prev.disabled = state.page <= 1;
      next.disabled = state.page >= pages;
      // On a fleet's console the counts are the detectors' sum: say when some did not answer.
      const partial = partialText(res.meta.detectors, 'detectors');
      fill(message, res.items.length
        ? (partial ? h('span', {class: 'error', id: 'rules-partial'}, `${partial}; fire counts are those of the others`) : '')
        : 'No rule matches these filters. Clear the search or choose "Any" to see the whole catalogue.');
    } catch (e) {
      if (mine === request) fill(message, h('span', {class: 'error'}, failure('rules unavailable', e)));
    }
  }

  function reload() {
    state.page = 1;
    load();
  }

  function turn(step) {
    state.page = Math.max(1, state.page + step);
    load();
  }

  function row(rule) {
    const toggle = h('input', {type: 'checkbox', checked: rule.enabled,
      'aria-label': `${rule.enabled ? 'Disable' : 'Enable'} ${rule.title}`,
      on: {click: (ev) => ev.stopPropagation(), change: () => setEnabled(rule, toggle)}});
    const trend = h('span', {class: 'spark'});
    const tr = h('tr', {class: 'clickable', tabindex: 0, dataset: {id: rule.id},
      on: {click: () => show(rule.id), keydown: (ev) => { if (ev.key === 'Enter') show(rule.id); }}},
    h('td', {}, toggle),
    h('td', {}, severityBadge(rule.severity)),
    h('td', {},
      h('div', {class: 'title'}, rule.title),
      h('div', {class: 'muted small'}, rule.id, ' · ', SOURCES[rule.source] || rule.source,
        rule.kind === 'correlation' ? ' · correlation' : '',
        rule.mapped ? '' : h('span', {class: 'error', title: 'Its logsource maps onto no events: it can never fire'}, ' · unmapped'))),
    h('td', {class: 'small'}, techniques(rule.attack)),
    h('td', {class: 'num'}, trend, ' ', count(rule.fires_24h)));
    if (state.selected === rule.id) tr.classList.add('selected');
    if (rule.fires_24h > 0) sparkline(rule.id, trend);
    return tr;
  }

  async function setEnabled(rule, box) {
    box.disabled = true;
    try {
      const updated = await patch(`/sigma/rules/${encodeURIComponent(rule.id)}`, {enabled: box.checked});
      rule.enabled = updated.enabled;
      box.checked = updated.enabled;
      if (state.selected === rule.id) show(rule.id);
    } catch (e) {
      box.checked = !box.checked;
      fill(message, h('span', {class: 'error'}, failure(`could not change ${rule.title}`, e)));
    } finally {
      box.disabled = false;
    }
  }

  // The trend chart takes the theme's colours when drawn: drawn again on a change of theme.
  window.addEventListener('themechange', () => {
    if (state.selected) show(state.selected);
  });

  async function show(id) {
    state.selected = id;
    for (const tr of rows.children) tr.classList.toggle('selected', tr.dataset.id === id);
    fill(detail, h('p', {class: 'muted'}, 'Loading…'));
    try {
      const [rule, timeline] = await Promise.all([
        get(`/sigma/rules/${encodeURIComponent(id)}`),
        get(`/sigma/rules/${encodeURIComponent(id)}/timeline`),
      ]);
      if (state.selected !== id) return;
      fill(detail, ruleDetail(rule, timeline));
    } catch (e) {
      fill(detail, h('p', {class: 'error'}, failure('rule unavailable', e)));
    }
  }

  function ruleDetail(rule, timeline) {
    const toggle = h('button', {type: 'button', id: 'rule-toggle', on: {click: async () => {
      toggle.disabled = true;
      try {
        await patch(`/sigma/rules/${encodeURIComponent(rule.id)}`, {enabled: !rule.enabled});
        await load();
        show(rule.id);
      } catch (e) {
        toggle.disabled = false;
        toggle.after(h('span', {class: 'error'}, ` ${failure('not changed', e)}`));
      }
    }}}, rule.enabled ? 'Disable' : 'Enable');
    const chart = h('div', {class: 'chart', id: 'rule-chart'});
    const out = h('div', {},
      h('h3', {class: 'rule-title'}, severityBadge(rule.severity), ' ', rule.title),
      h('div', {class: 'actions'}, toggle,
        h('button', {type: 'button', on: {click: () => openEditor(withNewId(rule.yaml || ''))}},
          'Edit as a new rule…'),
        h('span', {class: rule.enabled ? 'muted' : 'error'}, rule.enabled ? 'enabled' : 'disabled')),
      h('dl', {class: 'facts'},
        fact('id', h('span', {class: 'mono'}, rule.id)),
        fact('level', rule.level),
        fact('status', rule.status),
        fact('source', `${SOURCES[rule.source] || rule.source}${rule.path ? ` (${rule.path})` : ''}`),
        fact('kind', rule.kind),
        fact('logsource', Object.entries(rule.logsource || {}).map(([k, v]) => `${k}: ${v}`).join(', ')),
        fact('author', rule.author),
        fact('mapped', rule.mapped ? 'yes' : 'no: its logsource maps onto no events, so it never fires')),
      rule.description ? h('p', {}, rule.description) : null,
      (rule.warnings || []).length
        ? h('ul', {class: 'warnings'}, rule.warnings.map((w) => h('li', {class: 'error'}, w))) : null,
      h('h3', {}, `Fires in the last 24 hours: ${count(timeline.total)}`),
      chart,
      h('h3', {}, 'ATT&CK'),
      (rule.attack || []).length
        ? h('ul', {}, rule.attack.map((a) => h('li', {},
          h('a', {href: attackUrl(a.technique_id), target: '_blank', rel: 'noopener noreferrer'},
            a.technique_id), ` ${a.technique} · ${a.tactic}`)))
        : h('p', {class: 'muted'}, 'No ATT&CK mapping.'),
      (rule.falsepositives || []).length
        ? [h('h3', {}, 'False positives'), h('ul', {}, rule.falsepositives.map((f) => h('li', {}, f)))]
        : null,
      (rule.references || []).length
        ? [h('h3', {}, 'References'), h('ul', {class: 'refs'}, rule.references.map((r) => h('li', {},
          /^https?:\/\//.test(r) ? h('a', {href: r, target: '_blank', rel: 'noopener noreferrer'}, r) : r)))]
        : null,
      h('h3', {}, 'YAML'),
      yamlView(rule.yaml || ''),
    );
    requestAnimationFrame(() => trendChart(chart, timeline));
    return out;
  }

  function openEditor(yaml) {
    state.selected = null;
    for (const tr of rows.children) tr.classList.remove('selected');
    fill(detail, editor(yaml || template(), async (uploaded) => {
      await load();
      show(uploaded.id);
    }));
  }

  load();
  return {load};
}

/** The upload editor: the YAML with line numbers, Dry run and Upload, errors at their place. */
function editor(initial, onUploaded) {
  const text = h('textarea', {class: 'yaml editor', id: 'rule-yaml', spellcheck: false, rows: 24,
    'aria-label': 'Sigma rule YAML'});
  text.value = initial;
  const gutter = h('div', {class: 'gutter', 'aria-hidden': 'true'});
  const result = h('div', {id: 'rule-result', 'aria-live': 'polite'});
  let badLine = 0;
  const numbers = () => {
    const lines = text.value.split('\n').length;
    fill(gutter, Array.from({length: lines}, (_, i) =>
      h('div', {class: i + 1 === badLine ? 'bad' : null}, String(i + 1))));
    gutter.scrollTop = text.scrollTop;
  };
  text.addEventListener('input', () => { badLine = 0; numbers(); });
  text.addEventListener('scroll', () => { gutter.scrollTop = text.scrollTop; });
  numbers();

  async function send(dryRun) {
    badLine = 0;
    fill(result, h('p', {class: 'muted'}, dryRun ? 'Running against the last 24 hours…' : 'Uploading…'));
    try {
      const res = await post('/sigma/rules', {yaml: text.value, dry_run: dryRun});
      numbers();
      if (dryRun) {
        fill(result, h('div', {class: 'ok-box'},
          h('p', {}, h('strong', {}, 'Valid. '),
            `Matched ${count(res.matched)} of ${count(res.events_scanned)} stored events of the last 24 hours`
            + `${res.truncated ? ' (the scan stopped at its bound)' : ''}.`),
          (res.warnings || []).length
            ? h('ul', {}, res.warnings.map((w) => h('li', {class: 'error'}, w))) : null,
          (res.sample_event_ids || []).length
            ? h('p', {class: 'muted small'}, 'Sample events: ', res.sample_event_ids.slice(0, 5).join(', ')) : null));
      } else {
        fill(result, h('p', {class: 'ok-box'}, `Uploaded: ${res.title} is live from the next batch.`));
        onUploaded(res);
      }
    } catch (e) {
      if (e.code === 'invalid_rule' && e.body && e.body.line) {
        badLine = e.body.line;
        numbers();
        placeCaret(text, e.body.line, e.body.column || 1);
        fill(result, h('p', {class: 'error', id: 'rule-error'},
          `Line ${e.body.line}, column ${e.body.column || 1} (${e.body.kind}): ${e.message}`));
      } else if (e.code === 'rule_exists') {
        fill(result, h('p', {class: 'error', id: 'rule-error'},
          `A rule with this id is loaded already (${e.body.rule_id || ''}): give the rule a new id.`));
      } else {
        fill(result, h('p', {class: 'error', id: 'rule-error'}, failure('not accepted', e)));
      }
    }
  }

  return h('div', {class: 'rule-editor'},
    h('h3', {class: 'rule-title'}, 'Upload a custom rule'),
    h('p', {class: 'muted small'}, 'Paste or write a Sigma rule. Dry run checks it and counts what it '
      + 'would have matched in the last 24 hours of stored events; Upload makes it live.'),
    h('div', {class: 'code-edit'}, gutter, text),
    h('div', {class: 'actions'},
      h('button', {type: 'button', id: 'rule-dry-run', on: {click: () => send(true)}}, 'Dry run'),
      h('button', {type: 'button', id: 'rule-submit', on: {click: () => send(false)}}, 'Upload')),
    result);
}

/** Puts the caret at a 1-based line and column of a textarea and scrolls it into view. */
function placeCaret(area, line, column) {
  const lines = area.value.split('\n');
  let at = 0;
  for (let i = 0; i < line - 1 && i < lines.length; i++) at += lines[i].length + 1;
  at += Math.max(0, column - 1);
  area.focus();
  area.setSelectionRange(at, at);
  const lineHeight = parseFloat(getComputedStyle(area).lineHeight) || 16;
  area.scrollTop = Math.max(0, (line - 4) * lineHeight);
}

/** The YAML, one element per line, keys, strings, comments and list marks coloured. */
function yamlView(yaml) {
  return h('pre', {class: 'yaml-view', id: 'rule-yaml-view'}, yaml.split('\n').map((line) =>
    h('div', {class: 'yl'}, yamlLine(line))));
}

function yamlLine(line) {
  const comment = line.match(/^(\s*)(#.*)$/);
  if (comment) return [comment[1], h('span', {class: 'y-comment'}, comment[2])];
  const m = line.match(/^(\s*)(- )?([^'"\s:#][^:#]*?|'[^']*'|"[^"]*")?(:)(\s|$)(.*)$/);
  if (m && m[3] !== undefined) {
    return [m[1], m[2] ? h('span', {class: 'y-dash'}, m[2]) : null,
      h('span', {class: 'y-key'}, m[3]), m[4], m[5], value(m[6])];
  }
  const item = line.match(/^(\s*)(- )(.*)$/);
  if (item) return [item[1], h('span', {class: 'y-dash'}, item[2]), value(item[3])];
  return [line];
}

function value(text) {
  if (!text) return null;
  const hash = text.search(/\s#/);
  const body = hash >= 0 ? text.slice(0, hash) : text;
  const tail = hash >= 0 ? h('span', {class: 'y-comment'}, text.slice(hash)) : null;
  let cls = 'y-value';
  if (/^['"]/.test(body)) cls = 'y-string';
  else if (/^-?\d+(\.\d+)?\s*$/.test(body) || /^(true|false|null)\s*$/.test(body)) cls = 'y-literal';
  return [h('span', {class: cls}, body), tail];
}

/** A 24-bar sparkline of a rule's hourly fires. */
async function sparkline(id, el) {
  try {
    const t = await get(`/sigma/rules/${encodeURIComponent(id)}/timeline`);
    const xs = t.buckets.map((_, i) => i);
    const ys = t.buckets.map((b) => b.count);
    el.title = `fires per hour, last 24 hours (max ${Math.max(...ys)})`;
    // eslint-disable-next-line no-new
    new uPlot({
      width: 72, height: 18, pxAlign: false, cursor: {show: false}, legend: {show: false},
      select: {show: false}, axes: [{show: false}, {show: false}],
      scales: {x: {time: false}, y: {range: [0, Math.max(1, ...ys)]}},
      series: [{}, {stroke: '#f0883e', fill: 'rgba(240,136,62,.35)', width: 1, points: {show: false},
        paths: uPlot.paths.bars({size: [0.8, 4]})}],
    }, [xs, ys], el);
  } catch {
    // The count beside it stands; a sparkline refused by the rate limit is not worth an error.
  }
}

/** The rule's hourly fires as bars on a time axis (the browser's zone; UTC in the legend). */
function trendChart(el, timeline) {
  const xs = timeline.buckets.map((b) => Number(b.hour_ns) / 1e9);
  const ys = timeline.buckets.map((b) => b.count);
  const width = Math.max(280, el.clientWidth || 480);
  // eslint-disable-next-line no-new
  new uPlot({
    width, height: 150,
    legend: {live: true},
    cursor: {points: {show: false}},
    scales: {y: {range: [0, Math.max(1, ...ys) * 1.1]}},
    axes: [
      {...axisColours()},
      {...axisColours(), size: 40},
    ],
    series: [
      {label: 'hour', value: (u, v) => (v == null ? '' : `${new Date(v * 1000).toLocaleString([],
        {hour12: false})} (${new Date(v * 1000).toISOString().slice(11, 16)} UTC)`)},
      {label: 'fires', stroke: '#f0883e', fill: 'rgba(240,136,62,.45)', points: {show: false},
        paths: uPlot.paths.bars({size: [0.7, 40]}), value: (u, v) => (v == null ? '' : count(v))},
    ],
  }, [xs, ys], el);
}

function techniques(attack) {
  const ids = [...new Set((attack || []).map((a) => a.technique_id).filter(Boolean))];
  return ids.length ? ids.map((id, i) => [i ? ', ' : '', h('span', {class: 'mono', title:
    (attack.find((a) => a.technique_id === id) || {}).technique || ''}, id)]) : h('span', {class: 'muted'}, '-');
}

function fact(name, val) {
  if (val === undefined || val === null || val === '') return null;
  return [h('dt', {}, name), h('dd', {}, val)];
}

function select(id, label, options) {
  return h('select', {id, 'aria-label': label},
    options.map(([v, text]) => h('option', {value: v}, text)));
}

/** A rule's YAML with a fresh top-level `id`, so that an edited copy uploads beside it. */
function withNewId(yaml) {
  return /^id:/m.test(yaml) ? yaml.replace(/^id:.*$/m, `id: ${uuid()}`) : `id: ${uuid()}\n${yaml}`;
}

/** A random (version 4) UUID; `crypto.randomUUID` exists only on https and localhost pages. */
function uuid() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, '0')).join('');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
