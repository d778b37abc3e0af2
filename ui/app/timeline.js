// The Anomaly Timeline: the content ensemble's scores per time bucket with the alerts first seen
// in each, on one time axis, from `GET /anomaly/timeline`. Range and resolution are the spec's;
// the source filter is exact, as the API takes it. Hovering shows a bucket's figures in the
// legend; clicking a bucket lists its alerts and events below the chart.
//
// The range is "auto" until the analyst picks one (remembered): the smallest of 1 h, 6 h, 24 h
// and 7 d that holds the activity, so a new install's ten minutes of data are not a flat line with
// a blip at the right edge of a day. The current minute shows as it fills (the service writes its
// open minute every second); alerts show at once. The chart reloads when a selector changes, when
// the stream brings alerts (at most every 10 s) and once a minute while the Monitor view is shown
// (the endpoint counts against the list rate limit, 60 a minute by default).

import {failure, get} from './api.js';
import {debounce, fill, h, stored} from './dom.js';
import {axisColours, clock, count, iso, severityBadge, themed} from './format.js';
import uPlot from './uplot.js';

const RANGES = ['1h', '6h', '24h', '7d'];
const RESOLUTIONS = ['1m', '5m', '15m', '1h'];
/** The API's default resolution per range. */
const DEFAULT_RESOLUTION = {'1h': '1m', '6h': '5m', '24h': '15m', '7d': '1h'};
const RESOLUTION_S = {'1m': 60, '5m': 300, '15m': 900, '1h': 3600};
const RANGE_S = {'1h': 3600, '6h': 21600, '24h': 86400, '7d': 604800};
/** The API's bound on buckets in one answer. */
const MAX_BUCKETS = 2016;
const REFRESH_MS = 60_000;
/** Least time between two reloads the stream's alerts cause. */
const ALERT_RELOAD_MS = 10_000;
const LIST_LIMIT = 20;
const RANGE_KEY = 'watchpost.timeline.range';

/**
 * The range "auto" settles on after seeing `data` (of range `shown`): the smallest of 1 h, 6 h
 * and 24 h that holds the activity of the last day (a new install's first minutes fill the
 * chart rather than a blip at the right edge of a day), 24 h once the activity fills a day (a
 * sensor that has run for days sees its day, as before), and 7 days only when the last day was
 * quiet. Activity reaching a window's left edge may go back further: a wider window is asked for.
 */
export function autoRange(data, shown) {
  const b = data.buckets;
  const first = b.findIndex((x) => x.events > 0 || x.alerts > 0);
  const wider = RANGES[Math.min(RANGES.length - 1, RANGES.indexOf(shown) + 1)];
  if (first < 0) return wider;
  if (first === 0) return shown === '24h' || shown === '7d' ? '24h' : wider;
  const step = RESOLUTION_S[data.resolution] || 60;
  const end = Number(b[b.length - 1].ts_ns) / 1e9 + step;
  const age = end - Number(b[first].ts_ns) / 1e9;
  return RANGES.find((r) => RANGE_S[r] >= age * 1.1) || '7d';
}

export function mountTimeline(root, stream, {onAlert} = {}) {
  const chosen = stored.get(RANGE_KEY);
  const auto = !RANGES.includes(chosen);
  // `auto`: the range follows the data (`range` is the one shown); otherwise the analyst's.
  const state = {auto, range: auto ? '1h' : chosen, resolution: '', source: '', data: null, plot: null,
    picked: null};
  const autoOption = h('option', {value: 'auto', selected: auto}, 'auto');
  const range = h('select', {id: 'timeline-range', 'aria-label': 'Range'}, autoOption,
    RANGES.map((r) => h('option', {value: r, selected: !auto && r === state.range}, `last ${r}`)));
  const resolution = h('select', {id: 'timeline-resolution', 'aria-label': 'Resolution'},
    h('option', {value: ''}, 'auto'), RESOLUTIONS.map((r) => h('option', {value: r}, `per ${r}`)));
  const source = h('input', {type: 'search', id: 'timeline-source', placeholder: 'Source (exact: sshd)',
    'aria-label': 'Source', list: 'timeline-sources'});
  const sources = h('datalist', {id: 'timeline-sources'});
  // The keyboard's way to a bucket: the canvas answers the mouse only.
  const buckets = h('select', {id: 'timeline-pick', 'aria-label': 'List the alerts and events of a bucket'});
  buckets.addEventListener('change', () => {
    const i = state.data ? state.data.buckets.findIndex((x) => String(x.ts_ns) === buckets.value) : -1;
    if (i >= 0) pick(i);
  });
  const summary = h('span', {class: 'muted', id: 'timeline-summary'});
  const chart = h('div', {class: 'timeline-chart', id: 'timeline-chart'});
  const message = h('p', {class: 'muted', id: 'timeline-message'}, 'Loading…');
  const bucket = h('div', {class: 'timeline-bucket', id: 'timeline-bucket', 'aria-live': 'polite'});
  // Another range, resolution or source makes other buckets: the one picked is let go.
  const refilter = () => {
    state.picked = null;
    fill(bucket);
    load();
  };
  range.addEventListener('change', () => {
    state.auto = range.value === 'auto';
    stored.set(RANGE_KEY, state.auto ? null : range.value);
    if (!state.auto) state.range = range.value;
    offerResolutions();
    refilter();
  });
  resolution.addEventListener('change', () => {
    state.resolution = resolution.value;
    refilter();
  });
  source.addEventListener('change', () => {
    state.source = source.value.trim();
    refilter();
  });
  root.append(h('div', {class: 'toolbar'}, range, resolution, source, sources, buckets, summary),
    message, chart, bucket);

  let loads = 0;
  async function load(settling = 0) {
    // Answers may return out of order (the timer, the stream's alerts, a selector): only the
    // latest request's is drawn.
    const mine = ++loads;
    try {
      const data = await get('/anomaly/timeline', {range: state.range,
        resolution: state.resolution || undefined, source: state.source || undefined});
      if (mine !== loads) return;
      if (state.auto && settling < RANGES.length) {
        const next = autoRange(data, state.range);
        if (next !== state.range) {
          state.range = next;
          state.picked = null;
          fill(bucket);
          offerResolutions();
          load(settling + 1);
          return;
        }
      }
      fill(autoOption, state.auto ? `auto (last ${state.range})` : 'auto');
      state.data = data;
      draw(data);
    } catch (e) {
      if (mine !== loads) return;
      // What is on screen no longer matches the selectors: it goes, the reason stays.
      if (state.plot) state.plot.destroy();
      state.plot = null;
      state.data = null;
      fill(summary);
      fill(message, failure('The timeline could not be loaded', e));
      message.hidden = false;
    }
  }

  /** Resolutions the API takes for the range (at most 2,016 buckets) are the only ones offered. */
  function offerResolutions() {
    const span = RANGE_S[state.auto ? '7d' : state.range];
    for (const option of resolution.options) {
      option.disabled = option.value !== '' && span / RESOLUTION_S[option.value] > MAX_BUCKETS;
    }
    if (resolution.selectedOptions[0]?.disabled) {
      resolution.value = '';
      state.resolution = '';
    }
  }

  function draw(data) {
    const b = data.buckets;
    const events = b.reduce((n, x) => n + x.events, 0);
    const alerts = b.reduce((n, x) => n + x.alerts, 0);
    const alarms = b.reduce((n, x) => n + x.alarms, 0);
    fill(summary, `${plural(events, 'event')}, ${plural(alerts, 'alert')}, ${plural(alarms, 'score alarm')} `
      + `in the last ${data.range}${data.source ? ` from ${data.source}` : ''}, per ${data.resolution}`);
    if (events === 0 && alerts === 0) {
      fill(message, data.source
        ? `Nothing from source “${data.source}” in the last ${data.range}: the filter is exact; `
          + 'clear it to see every source.'
        : `No events in the last ${data.range}. Send logs to the syslog or JSON inputs `
          + '(see the README), then watch the scores arrive here.');
      message.hidden = false;
    } else {
      message.hidden = true;
    }
    // A bucket without events has no score: a gap, not a zero that reads as "normal".
    const mean = b.map((x) => (x.events ? x.mean_score : null));
    const max = b.map((x) => (x.events ? x.max_score : null));
    const counts = b.map((x) => x.alerts);
    const step = RESOLUTION_S[data.resolution] || 60;
    // Each bucket drawn at its middle, so its bar fills its own span of the axis.
    const xs = b.map((x) => Number(x.ts_ns) / 1e9 + step / 2);
    const width = Math.max(320, chart.clientWidth || root.clientWidth - 24 || 900);
    if (state.plot) state.plot.destroy();
    state.plot = new uPlot({
      width, height: 150,
      legend: {live: true},
      cursor: {points: {show: true}, drag: {x: false, y: false}},
      scales: {x: {time: true, range: (u, min, max) => [min - step / 2, max + step / 2]},
        score: {range: [0, 1]}, alerts: {range: [0, Math.max(1, ...counts) * 1.2]}},
      axes: [
        {...axisColours()},
        {scale: 'score', ...axisColours(),
          size: 40, label: 'score'},
        {scale: 'alerts', side: 1, stroke: '#f0883e', grid: {show: false}, ticks: {stroke: themed('--line')},
          size: 40, label: 'alerts'},
      ],
      series: [
        {label: 'bucket', value: (u, v) => (v == null ? '' : bucketLabel(v - step / 2))},
        {label: 'alerts', scale: 'alerts', stroke: '#f0883e', fill: 'rgba(240,136,62,.35)',
          points: {show: false}, paths: uPlot.paths.bars({size: [0.8, 30]}),
          value: (u, v) => (v == null ? '' : count(v))},
        {label: 'max score', scale: 'score', stroke: '#f85149', width: 1.5, spanGaps: false,
          value: (u, v) => (v == null ? '-' : v.toFixed(3))},
        {label: 'mean score', scale: 'score', stroke: '#388bfd', width: 1.5, spanGaps: false,
          value: (u, v) => (v == null ? '-' : v.toFixed(3))},
      ],
    }, [xs, counts, max, mean], chart);
    state.plot.over.addEventListener('click', () => {
      const i = state.plot.cursor.idx;
      if (i !== null && i !== undefined) pick(i);
    });
    state.plot.over.title = 'Click a bucket to list its alerts and events';
    // The window slides as buckets close: the picked bucket is found again by its time.
    if (state.picked !== null) {
      const i = b.findIndex((x) => x.ts_ns === state.picked);
      if (i >= 0) markPicked(i);
      else state.picked = null;
    }
    const busy = b.filter((x) => x.events || x.alerts).reverse();
    fill(buckets, h('option', {value: ''}, busy.length ? `Bucket… (${busy.length} with activity)` : 'No active bucket'),
      busy.map((x) => h('option', {value: String(x.ts_ns), selected: x.ts_ns === state.picked},
        `${bucketLabel(Number(x.ts_ns) / 1e9)}: ${plural(x.alerts, 'alert')}, ${plural(x.events, 'event')}`)));
    offerSources();
  }

  /** The bucket's alerts and events, below the chart. */
  async function pick(i) {
    const b = state.data.buckets[i];
    state.picked = b.ts_ns;
    markPicked(i);
    const step = RESOLUTION_S[state.data.resolution] || 60;
    const since = iso(b.ts_ns);
    const until = new Date(Number(b.ts_ns) / 1e6 + step * 1000).toISOString();
    const alertsList = h('ul', {class: 'plain', id: 'timeline-alerts'}, h('li', {class: 'muted'}, 'Loading…'));
    const eventsList = h('ul', {class: 'plain mono', id: 'timeline-events'}, h('li', {class: 'muted'}, 'Loading…'));
    fill(bucket,
      h('h3', {}, `${bucketLabel(Number(b.ts_ns) / 1e9)} – ${state.data.resolution}: `
        + `${plural(b.events, 'event')}, mean ${b.events ? b.mean_score.toFixed(3) : '-'}, `
        + `max ${b.events ? b.max_score.toFixed(3) : '-'}, ${plural(b.alarms, 'alarm')}, ${plural(b.alerts, 'alert')}`),
      h('div', {class: 'timeline-lists'},
        h('section', {}, h('h4', {}, 'Alerts first seen'), alertsList),
        h('section', {}, h('h4', {}, 'Events'), eventsList)));
    try {
      const a = await get('/alerts', {since, until, limit: LIST_LIMIT});
      fill(alertsList, a.items.length ? a.items.map((al) => h('li', {},
        h('button', {type: 'button', class: 'link', dataset: {id: al.id},
          on: {click: () => onAlert && onAlert(al.id)}},
        severityBadge(al.severity), ' ', al.title || al.detector_name || al.detector, ' ',
        h('span', {class: 'muted', title: iso(al.first_seen_ns)}, clock(al.first_seen_ns)))))
        : h('li', {class: 'muted'}, 'No alert was first seen in this bucket.'));
      if (a.meta && a.meta.total > a.items.length) {
        alertsList.append(h('li', {class: 'muted'}, `${count(a.meta.total - a.items.length)} more`));
      }
    } catch (e) {
      fill(alertsList, h('li', {class: 'error'}, failure('Alerts', e)));
    }
    try {
      const ev = await get('/events', {since, until, source: state.source || undefined, limit: LIST_LIMIT});
      fill(eventsList, ev.items.length ? ev.items.map((e) => h('li', {title: iso(e.timestamp_ns)},
        h('span', {class: 'muted'}, clock(e.timestamp_ns)), ' ', severityBadge(e.severity), ' ',
        h('b', {}, e.source), ' ', h('span', {class: 'msg'}, e.message)))
        : h('li', {class: 'muted'}, 'No stored event in this bucket.'));
      if (ev.meta && ev.meta.total > ev.items.length) {
        eventsList.append(h('li', {class: 'muted'}, `${count(ev.meta.total - ev.items.length)} more`));
      }
    } catch (e) {
      fill(eventsList, h('li', {class: 'error'}, failure('Events', e)));
    }
  }

  function markPicked(i) {
    const x = state.data.buckets[i] && Number(state.data.buckets[i].ts_ns) / 1e9;
    if (x === undefined) return;
    const step = RESOLUTION_S[state.data.resolution] || 60;
    const left = state.plot.valToPos(x, 'x');
    const right = state.plot.valToPos(x + step, 'x');
    state.plot.setSelect({left, width: Math.max(2, right - left), top: 0,
      height: state.plot.over.clientHeight || 120}, false);
  }

  /** The sources seen recently, offered as the filter's choices. */
  async function offerSources() {
    if (sources.childElementCount) return;
    try {
      const ev = await get('/events', {limit: 100});
      const names = [...new Set(ev.items.map((e) => e.source))].sort();
      fill(sources, names.map((n) => h('option', {value: n})));
    } catch {
      // Only a convenience; typing the source works without it.
    }
  }

  let timer = null;
  const visible = () => !root.closest('[hidden]');
  function start() {
    load();
    clearInterval(timer);
    timer = setInterval(() => {
      if (visible() && !document.hidden) load();
    }, REFRESH_MS);
  }
  let lastAlertReload = 0;
  let pending = null;
  const onAlerts = () => {
    if (pending) return;
    const wait = Math.max(0, lastAlertReload + ALERT_RELOAD_MS - Date.now());
    pending = setTimeout(() => {
      pending = null;
      lastAlertReload = Date.now();
      if (visible()) load();
    }, wait);
  };
  stream.on('alert', onAlerts);
  stream.on('alert_batch', onAlerts);
  window.addEventListener('resize', debounce(() => state.data && draw(state.data), 200));
  window.addEventListener('themechange', () => state.data && draw(state.data));
  start();
  return {load};
}

function plural(n, word) {
  return `${count(n)} ${word}${n === 1 ? '' : 's'}`;
}

function bucketLabel(seconds) {
  const d = new Date(seconds * 1000);
  return `${d.toLocaleString([], {hour12: false, month: 'short', day: 'numeric', hour: '2-digit',
    minute: '2-digit'})} (${d.toISOString().slice(11, 16)} UTC)`;
}

