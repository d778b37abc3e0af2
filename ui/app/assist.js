// LLM assistance in the dashboard: an alert's explanation (with a plain summary when the LLM is
// off or fails), the Hunt tab and the Rule Suggestions tab. Everything the model writes is shown
// as text: Markdown is turned into elements here, never parsed as HTML.

import {del, get, post} from './api.js';
import {h, fill} from './dom.js';
import {count, entity, iso, severityBadge, severityName, partialText, thresholdText} from './format.js';

let backendOnce = null;

/**
 * `llm.backend` of the running service (`''` when the LLM is off), read once from `GET /config`:
 * with the LLM off the page offers no LLM action rather than making requests bound to fail.
 */
export function llmBackend() {
  if (!backendOnce) {
    backendOnce = get('/config').then((c) => (c.llm && c.llm.backend) || '', () => '');
  }
  return backendOnce;
}

/** What one deviation says of its entity, in an analyst's words. */
function deviationPhrase(signal, value) {
  return {
    new_hour: `active at ${String(Math.floor(value)).padStart(2, '0')}:00 UTC, an hour it has never used`,
    rate: `${Math.round(value)} times its usual rate of events`,
    new_source: 'a source it has never used',
    new_host: 'a host it has never been on',
    dormancy: `active again after ${Math.floor(value)} days of silence`,
  }[signal] || signal;
}

/**
 * A strong deviation in an analyst's words: what, and how unlikely under the history; with the
 * second dimension when it took two on one event to alert (their surprisals add).
 */
export function deviationText(d) {
  const odds = Math.round(Math.pow(2, d.bits));
  const what = deviationPhrase(d.signal, d.value);
  const also = d.with
    ? ` together with ${deviationPhrase(d.with.signal, d.with.value)} (${d.with.bits.toFixed(1)} of the bits)`
    : '';
  return `${what}${also} (odds about 1 in ${count(odds)}, ${d.bits.toFixed(1)} bits)`;
}

/** A plain, deterministic summary of an alert: what the detail degrades to without the LLM. */
export function plainSummary(a) {
  const who = a.entity ? ` about ${entity(a.entity)}` : '';
  const parts = [
    `A ${severityName(a.severity)} ${a.type} alert${who}, raised by ${a.detector_name || a.detector} on ${a.source || 'an unknown source'}.`,
  ];
  if (a.deviation) {
    parts.push(a.deviation.with
      ? `Two dimensions at once were far outside the entity's history: ${deviationText(a.deviation)}.`
      : `One dimension alone was far outside the entity's history: ${deviationText(a.deviation)}.`);
  } else if (a.threshold > 0 && a.threshold < 1e300) {
    parts.push(`Its score ${a.score.toFixed(3)} passed the threshold ${thresholdText(a.threshold)}.`);
  }
  const top = Object.entries(a.contributions || {}).sort((x, y) => y[1] - x[1])[0];
  if (top) parts.push(`The largest contribution came from ${top[0]} (${top[1].toFixed(3)}).`);
  parts.push(a.count > 1
    ? `It fired ${count(a.count)} times between ${iso(a.first_seen_ns)} and ${iso(a.last_seen_ns)}.`
    : `It fired once, at ${iso(a.first_seen_ns)}.`);
  if (a.attack && a.attack.length) {
    parts.push(`ATT&CK: ${a.attack.map((m) => `${m.technique_id} ${m.technique} (${m.tactic})`).join('; ')}.`);
  }
  const n = (a.contributing_events || []).length;
  if (n) parts.push(`${count(n)} contributing event${n === 1 ? '' : 's'} recorded.`);
  return parts.join(' ');
}

/** Markdown as elements: headings, list items and paragraphs; everything else stays text. */
export function markdown(text) {
  const out = [];
  let list = null;
  let fence = null;
  for (const line of String(text).split('\n')) {
    if (line.startsWith('```')) {
      if (fence) { out.push(h('pre', {class: 'mono'}, fence.join('\n'))); fence = null; } else fence = [];
      continue;
    }
    if (fence) { fence.push(line); continue; }
    const item = line.match(/^\s*(?:[-*]|\d+\.)\s+(.*)$/);
    if (item) {
      if (!list) { list = h('ul', {}); out.push(list); }
      list.append(h('li', {}, item[1]));
      continue;
    }
    list = null;
    const heading = line.match(/^#{1,6}\s+(.*)$/);
    if (heading) out.push(h('h4', {}, heading[1]));
    else if (line.trim()) out.push(h('p', {}, line));
  }
  if (fence) out.push(h('pre', {class: 'mono'}, fence.join('\n')));
  return out;
}

/**
 * The Explanation section of an alert detail: the cached explanation if there is one, else the
 * plain summary with an Explain button when the LLM is configured. A failure keeps the summary.
 */
export function explanationSection(a) {
  const body = h('div', {class: 'explanation', id: 'explanation'});
  const note = h('p', {class: 'muted small', role: 'status'});
  const button = h('button', {type: 'button', id: 'explain', hidden: true}, 'Explain');
  const showSummary = () => fill(body, h('p', {class: 'plain-summary'}, plainSummary(a)));
  const showExplanation = (e) => {
    fill(body, ...markdown(e.markdown));
    fill(note, `Written by ${e.model} (${e.backend}) at ${iso(e.generated_ns)}${e.cached ? ', from the cache' : ''}.`);
    button.textContent = 'Explain again';
  };
  const path = `/alerts/${encodeURIComponent(a.id)}`;
  button.addEventListener('click', async () => {
    button.disabled = true;
    fill(note, 'Asking the LLM…');
    try {
      showExplanation(await post(`${path}/explain`, {refresh: button.textContent !== 'Explain'}));
    } catch (e) {
      showSummary();
      fill(note, `No explanation (${e.status}): ${e.message}`);
    } finally {
      button.disabled = false;
    }
  });
  showSummary();
  llmBackend().then((backend) => {
    if (!backend) {
      fill(note, 'LLM assistance is off (llm.backend); this is the plain summary.');
      return;
    }
    button.hidden = false;
    // A cached explanation is shown at once; 404 means none is cached yet.
    get(`${path}/explanation`).then(showExplanation, () => {});
  });
  return [h('h3', {}, 'Explanation'), body, h('div', {class: 'actions'}, button, note)];
}

function eventRows(events) {
  return h('table', {class: 'rows'},
    h('thead', {}, h('tr', {}, ['Time', 'Sev', 'Source', 'Host', 'Message'].map((c) => h('th', {scope: 'col'}, c)))),
    h('tbody', {}, events.map((e) => h('tr', {},
      h('td', {class: 'nowrap', title: iso(e.timestamp_ns)}, iso(e.timestamp_ns).slice(0, 19)),
      h('td', {}, severityBadge(e.severity)),
      h('td', {class: 'mono'}, e.source),
      h('td', {class: 'mono'}, e.host),
      h('td', {class: 'message'}, e.message)))));
}

/** The filters a hunt ran, as `source=sshd, text="failed"`; "every event" when it had none. */
function describeQuery(q) {
  const parts = [];
  if (q.entities && q.entities.length) parts.push(`entities=${q.entities.join('|')}`);
  if (q.source) parts.push(`source=${q.source}`);
  if (q.min_severity !== null && q.min_severity !== undefined) parts.push(`severity≥${severityName(q.min_severity)}`);
  if (q.text) parts.push(`text=${JSON.stringify(q.text)}`);
  if (q.since_ns) parts.push(`since ${iso(q.since_ns)}`);
  if (q.until_ns) parts.push(`until ${iso(q.until_ns)}`);
  return parts.length ? parts.join(', ') : 'every event';
}

/** The Hunt tab: a question in, the events that answer it and the query that ran out. */
export function mountHunt(root) {
  const input = h('input', {id: 'hunt-query', type: 'search', maxlength: 512, required: true,
    placeholder: 'e.g. failed ssh logins in the last 6 hours, or an IP address or host', 'aria-label': 'Hunting question'});
  const limit = h('select', {id: 'hunt-limit', 'aria-label': 'Most events'},
    [25, 50, 100].map((n) => h('option', {value: n, selected: n === 100}, `${n} events`)));
  const refresh = h('input', {type: 'checkbox', id: 'hunt-refresh'});
  const result = h('div', {id: 'hunt-result', class: 'scroll'});
  const form = h('form', {class: 'toolbar', on: {submit: async (ev) => {
    ev.preventDefault();
    fill(result, h('p', {class: 'muted'}, 'Hunting…'));
    try {
      const a = await post('/hunt', {query: input.value, limit: Number(limit.value), refresh: refresh.checked});
      const ran = a.mode === 'entity'
        ? `Events of ${a.entities.map((e) => `${e.kind || 'unknown'}:${e.value}`).join(', ')} (entity lookup, no LLM)`
        : `Translated by ${a.model} into ${describeQuery(a.executed)}`;
      const total = `${a.total_exact ? '' : 'at least '}${count(a.total)}`;
      fill(result,
        h('p', {class: 'muted', id: 'hunt-summary'}, `${ran}: ${count(a.events.length)} shown of ${total}`,
          a.cached ? ` (cached answer from ${iso(a.generated_ns)})` : ''),
        partialText(a.sensors) ? h('p', {class: 'error', id: 'hunt-partial'}, partialText(a.sensors)) : null,
        a.events.length ? eventRows(a.events) : h('p', {class: 'muted'}, 'No events match.'));
    } catch (e) {
      fill(result, h('p', {class: 'error', id: 'hunt-error'}, `Hunt failed (${e.status}): ${e.message}`));
    }
  }}}, input, limit, h('label', {}, refresh, ' ask again'), h('button', {type: 'submit'}, 'Hunt'));
  root.append(form, h('p', {class: 'muted small'},
    'A question naming an IP address, entity UUID or known host is answered from its timeline without the LLM; any other is translated by the LLM into an event query.'),
  result);
}

/** The Rule Suggestions tab: eligible patterns, and a validated draft per pattern to edit, dry-run and upload. */
export function mountSuggestions(root) {
  const rows = h('tbody', {id: 'suggestion-rows'});
  const message = h('p', {class: 'muted', id: 'suggestion-message'}, 'Loading…');
  const draft = h('div', {id: 'suggestion-draft'});
  root.append(
    h('div', {class: 'toolbar'}, h('button', {type: 'button', on: {click: () => load()}}, 'Reload'),
      h('span', {class: 'muted small'}, 'Patterns of alerts confirmed as true positives (llm.rule_suggestion_min_tp).')),
    h('div', {class: 'scroll'},
      h('table', {class: 'rows'},
        h('thead', {}, h('tr', {}, ['Confirmed', 'Pattern', 'Last confirmed', ''].map((c) => h('th', {scope: 'col'}, c)))),
        rows),
      message, draft));

  async function load() {
    try {
      const [page, backend] = await Promise.all([get('/sigma/rule-suggestions', {limit: 200}), llmBackend()]);
      fill(rows, page.items.map((p) => h('tr', {dataset: {key: p.pattern_key}},
        h('td', {class: 'num'}, `${p.tp_count} / ${p.min_tp}`),
        h('td', {},
          h('div', {class: 'title'}, p.title),
          h('div', {class: 'muted small'}, `${p.alert_type} · ${p.detector_name || p.detector} · ${p.source}`),
          p.template && h('div', {class: 'mono small'}, p.template)),
        h('td', {class: 'nowrap'}, iso(p.last_tp_ns).slice(0, 19)),
        h('td', {}, h('button', {type: 'button', class: 'draft', disabled: !backend,
          title: backend ? null : 'LLM assistance is off (llm.backend)',
          on: {click: () => show(p.pattern_key, false)}},
        p.suggestion_cached ? 'Show draft' : 'Draft rule')))));
      message.hidden = page.items.length > 0 && Boolean(backend);
      fill(message, page.items.length
        ? 'LLM assistance is off (llm.backend): patterns are listed, drafts need the LLM.'
        : 'No pattern has enough true-positive feedback yet.');
    } catch (e) {
      message.hidden = false;
      fill(message, `Could not load suggestions: ${e.message}`);
    }
  }

  async function show(key, refresh) {
    fill(draft, h('p', {class: 'muted'}, 'Drafting…'));
    let s;
    try {
      s = await post(`/sigma/rule-suggestions/${encodeURIComponent(key)}`, {refresh});
    } catch (e) {
      fill(draft, h('p', {class: 'error', id: 'suggestion-error'}, `No draft (${e.status}): ${e.message}`));
      return;
    }
    const yaml = h('textarea', {id: 'suggestion-yaml', class: 'mono yaml', rows: 18, spellcheck: false,
      'aria-label': 'Draft rule YAML'});
    yaml.value = s.draft.yaml;
    const result = h('p', {class: 'muted', role: 'status'});
    const upload = (dryRun) => async () => {
      try {
        const r = await post('/sigma/rules', {yaml: yaml.value, dry_run: dryRun});
        fill(result, dryRun
          ? `Valid; matched ${count(r.matched)} of ${count(r.events_scanned)} events of the last 24 h.`
          : `Uploaded as ${r.id}; it applies from now on.`);
        result.className = 'muted';
      } catch (e) {
        const where = e.body && e.body.line ? ` (line ${e.body.line}, column ${e.body.column})` : '';
        fill(result, `${e.message}${where}`);
        result.className = 'error';
      }
    };
    fill(draft,
      h('h3', {}, s.draft.title),
      h('p', {class: 'muted small'}, `Drafted by ${s.model} at ${iso(s.generated_ns)}${s.cached ? ' (cached)' : ''}`,
        s.repaired ? '; its first draft was refused and corrected' : '',
        `; matches ${s.draft.matched_events} of ${s.draft.events_checked} evidence events.`),
      yaml,
      h('div', {class: 'actions'},
        h('button', {type: 'button', on: {click: upload(true)}}, 'Dry run'),
        h('button', {type: 'button', on: {click: upload(false)}}, 'Upload'),
        h('button', {type: 'button', on: {click: () => show(key, true)}}, 'Draft again'),
        h('button', {type: 'button', on: {click: async () => {
          try { await del(`/sigma/rule-suggestions/${encodeURIComponent(key)}`); } catch { /* already gone */ }
          fill(draft);
          load();
        }}}, 'Discard')),
      result,
      h('h3', {}, `Evidence: ${s.evidence.feedback.length} verdicts, ${s.evidence.events.length} events`),
      h('ul', {class: 'events'}, s.evidence.events.map((e) =>
        h('li', {}, h('span', {class: 'muted'}, iso(e.timestamp_ns)), ' ', h('span', {class: 'mono'}, e.source), ' ', e.message))));
    load();
  }

  return {load};
}
