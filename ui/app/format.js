// How values read on screen.

import {h} from './dom.js';

export const SEVERITIES = ['debug', 'informational', 'low', 'medium', 'high', 'critical'];

/** The name of a 0-5 severity. */
export function severityName(n) {
  return SEVERITIES[n] ?? String(n);
}

/** The short name a severity badge shows (`informational` is too wide for a table column). */
export function severityLabel(n) {
  return n === 1 ? 'info' : severityName(n);
}

/** A severity badge. */
export function severityBadge(n) {
  return h('span', {class: severityClass(n), title: severityName(n)}, severityLabel(n));
}

/** CSS class of a severity. */
export function severityClass(n) {
  return `sev sev-${Math.max(0, Math.min(5, n | 0))}`;
}

/** A nanosecond timestamp as local time of day (the full UTC time goes in the title). */
export function clock(ns) {
  const d = new Date(Number(ns) / 1e6);
  return d.toLocaleTimeString([], {hour12: false});
}

/** A nanosecond timestamp in ISO 8601, UTC. */
export function iso(ns) {
  if (ns === null || ns === undefined) return '';
  return new Date(Number(ns) / 1e6).toISOString();
}

/** A count with thousands separated. */
export function count(n) {
  return Number(n || 0).toLocaleString('en-US');
}

/** A rate per second, rounded sensibly. */
export function rate(n) {
  const v = Number(n || 0);
  return v >= 100 ? count(Math.round(v)) : v.toFixed(1);
}

/** An entity as `kind:value`. */
export function entity(e) {
  return e ? `${e.kind}:${e.value}` : '';
}

/** A colour of the current theme (a CSS custom property of the page), for charts and the graph. */
export function themed(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** uPlot axis colours of the current theme. */
export function axisColours() {
  return {stroke: themed('--muted'), grid: {stroke: themed('--rule')}, ticks: {stroke: themed('--line')}};
}

/** A detector's threshold: the API gives the largest finite number while one still calibrates
 * (in truth infinite, which JSON cannot carry). */
export function thresholdText(t) {
  return Number(t) >= 1e300 ? 'not calibrated yet' : Number(t).toFixed(3);
}

/** What a fleet's console says of a search some sensors (or, for `what` = 'detectors', the
 * counts some detectors) did not answer (`sensors` or `detectors` of the answer,
 * docs/cluster.md): the answer is partial, never presented as the whole. Empty when every node
 * asked answered, or on a node alone. */
export function partialText(sensors, what = 'sensors') {
  if (!sensors || !sensors.partial) return '';
  const missing = (sensors.missing || []).map((m) => `${m.sensor} (${m.error})`).join('; ');
  return `Partial: ${sensors.missing.length} of ${sensors.asked.length} ${what} did not answer: ${missing}`;
}

/** The ATT&CK site's page of a technique (`T1110.001`) or a tactic (`TA0006`). */
export function attackUrl(id) {
  const kind = String(id).startsWith('TA') ? 'tactics' : 'techniques';
  return `https://attack.mitre.org/${kind}/${String(id).replace('.', '/')}/`;
}
