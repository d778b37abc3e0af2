// Boots the dashboard: one stream shared by every widget, then the widgets, then the routes.
//
// The spec's six widgets share one board, laid out as each analyst likes it (layout.js); Hunt,
// Rule Suggestions, Signals and Exceptions are views of their own, behind tabs.
//
// Routes live in the URL's fragment so that a link survives a reload and can be pasted to a
// colleague: `#/alerts/<id>` (the alert's detail over the board), `#/entities/<uuid>` (the
// Entity Explorer on that entity), `#/<view>` for the views. Opening something updates the
// fragment in place (no history entry per click); following a link or editing the address moves.

import {stored} from './dom.js';
import {Stream} from './stream.js';
import {mountStatus} from './status.js';
import {mountAlerts} from './alerts.js';
import {mountEvents} from './events.js';
import {mountHunt, mountSuggestions} from './assist.js';
import {mountAttack} from './attack.js';
import {mountExceptions} from './exceptions.js';
import {mountSignals} from './signals.js';
import {fleetOf, mountFleet} from './fleet.js';
import {mountRules} from './rules.js';
import {mountTimeline} from './timeline.js';
import {mountEntities} from './entities.js';
import {mountLayout} from './layout.js';

// The theme: the system's unless one is chosen here (kept in local storage). Charts and the
// graph take their colours when drawn, so a change tells them to draw again.
const THEME_KEY = 'watchpost.theme';
const THEMES = ['auto', 'dark', 'light'];
const themeButton = document.getElementById('theme');
const systemDark = matchMedia('(prefers-color-scheme: dark)');
function applyTheme(theme) {
  const chosen = theme === 'dark' || theme === 'light';
  document.documentElement.dataset.theme = chosen ? theme : (systemDark.matches ? 'dark' : 'light');
  themeButton.textContent = `Theme: ${chosen ? theme : 'system'}`;
  themeButton.title = 'Switch between the system\'s theme, dark and light';
}
applyTheme(stored.get(THEME_KEY));
// Following the system: its change applies at once.
systemDark.addEventListener('change', () => {
  if (!stored.get(THEME_KEY)) {
    applyTheme('auto');
    window.dispatchEvent(new Event('themechange'));
  }
});
themeButton.addEventListener('click', () => {
  const now = stored.get(THEME_KEY) || 'auto';
  const next = THEMES[(THEMES.indexOf(now) + 1) % THEMES.length];
  stored.set(THEME_KEY, next === 'auto' ? null : next);
  applyTheme(next);
  window.dispatchEvent(new Event('themechange'));
});

const stream = new Stream();
mountStatus(document.getElementById('status'), stream);
const alerts = mountAlerts(document.getElementById('alerts'), document.getElementById('detail'), stream, {
  onOpen: (id) => mark(`#/alerts/${id}`),
  // Only an alert's own link is taken back: the detail also closes over the Entity Explorer.
  onClose: () => location.hash.startsWith('#/alerts/') && mark(`#/${current()}`),
});
mountTimeline(document.getElementById('timeline'), stream, {onAlert: (id) => alerts.open(id)});
mountEvents(document.getElementById('events'), stream);
mountHunt(document.querySelector('#hunt .widget'));
const suggestions = mountSuggestions(document.querySelector('#suggestions .widget'));
const attack = mountAttack(document.getElementById('attack'));
const exceptions = mountExceptions(document.querySelector('#exceptions .widget'));
const signals = mountSignals(document.querySelector('#signals .widget'));
const fleet = mountFleet(document.querySelector('#fleet .widget'));
// A node of a fleet shows its Fleet tab, and the alert feed offers a filter by sensor.
fleetOf().then((f) => {
  if (!f) return;
  document.getElementById('tab-fleet').hidden = false;
  alerts.sensors(f.sensors);
});
const rules = mountRules(document.getElementById('rules'));
const entities = mountEntities(document.getElementById('entities'), {
  onAlert: (id) => alerts.open(id),
  onShow: (uuid) => mark(`#/entities/${uuid}`),
});
stream.connect();
// The heatmap loads when it is on the board: at start, and when added back (the catalogue loads
// itself when mounted, and again when added back).
const layout = mountLayout(document.getElementById('monitor'), document.getElementById('layout-controls'), {
  onShown: (id) => {
    if (id === 'attack') attack.load();
    if (id === 'rules') rules.load();
  },
});
if (layout.has('attack')) attack.load();

// Tabs: one view shown at a time; the Rule Suggestions list, the signals and the exceptions
// reload each time they are opened.
const tabs = [...document.querySelectorAll('.tabs [role=tab]')];
const viewOf = (tab) => tab.getAttribute('aria-controls');

function select(view) {
  const tab = tabs.find((t) => viewOf(t) === view) || tabs[0];
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute('aria-selected', String(on));
    document.getElementById(viewOf(t)).hidden = !on;
  }
  document.getElementById('layout-controls').hidden = viewOf(tab) !== 'monitor';
  if (tab.id === 'tab-suggestions') suggestions.load();
  if (tab.id === 'tab-exceptions') exceptions.load();
  if (tab.id === 'tab-signals') signals.load();
  if (tab.id === 'tab-fleet') fleet.load();
  if (tab.id === 'tab-hunt') document.getElementById('hunt-query').focus();
}

function current() {
  const tab = tabs.find((t) => t.getAttribute('aria-selected') === 'true');
  return tab ? viewOf(tab) : 'monitor';
}

/** Writes `hash` into the address without a history entry or a `hashchange`. */
function mark(hash) {
  if (location.hash !== hash) history.replaceState(null, '', hash);
}

for (const tab of tabs) {
  tab.addEventListener('click', () => {
    select(viewOf(tab));
    mark(`#/${viewOf(tab)}`);
  });
}

/** Shows what the fragment names. */
function route() {
  let hash = location.hash;
  try {
    hash = decodeURIComponent(hash);
  } catch {
    // A mangled link (a bad % sequence) is read as written.
  }
  const [, kind, id] = hash.match(/^#\/([a-z]+)(?:\/(.+))?$/) || [];
  if (kind === 'alerts' && id) {
    select('monitor');
    alerts.open(id);
  } else if (kind === 'entities' && id) {
    select('monitor');
    layout.show('entities');
    entities.show(id);
  } else if (kind && tabs.some((t) => viewOf(t) === kind)) {
    select(kind);
  } else if (kind && ['timeline', 'alerts', 'events', 'entities', 'attack', 'rules'].includes(kind)) {
    select('monitor');
    layout.show(kind);
  }
}
window.addEventListener('hashchange', route);
route();
