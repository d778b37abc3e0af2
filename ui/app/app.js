// Boots the dashboard: one stream shared by every widget, then the widgets, then the routes.
//
// Routes live in the URL's fragment so that a link survives a reload and can be pasted to a
// colleague: `#/alerts/<id>` (the alert's detail over the Monitor view), `#/entities/<uuid>` (the
// Entity Explorer on that entity), `#/<view>` for the other views. Opening something updates the
// fragment in place (no history entry per click); following a link or editing the address moves.

import {Stream} from './stream.js';
import {mountStatus} from './status.js';
import {mountAlerts} from './alerts.js';
import {mountEvents} from './events.js';
import {mountHunt, mountSuggestions} from './assist.js';
import {mountAttack} from './attack.js';
import {mountExceptions} from './exceptions.js';
import {mountSignals} from './signals.js';
import {mountRules} from './rules.js';
import {mountTimeline} from './timeline.js';
import {mountEntities} from './entities.js';

const stream = new Stream();
mountStatus(document.getElementById('status'), stream);
const alerts = mountAlerts(document.getElementById('alerts'), document.getElementById('detail'), stream, {
  onOpen: (id) => mark(`#/alerts/${id}`),
  // Only an alert's own link is taken back: the detail also closes over the Entity Explorer.
  onClose: () => location.hash.startsWith('#/alerts/') && mark(`#/${current()}`),
});
mountTimeline(document.querySelector('#timeline'), stream, {onAlert: (id) => alerts.open(id)});
mountEvents(document.getElementById('events'), stream);
mountHunt(document.querySelector('#hunt .widget'));
const suggestions = mountSuggestions(document.querySelector('#suggestions .widget'));
const attack = mountAttack(document.querySelector('#attack .widget'));
const exceptions = mountExceptions(document.querySelector('#exceptions .widget'));
const signals = mountSignals(document.querySelector('#signals .widget'));
const rules = mountRules(document.querySelector('#rules .widget'));
const entities = mountEntities(document.querySelector('#entities .widget'), {
  onAlert: (id) => alerts.open(id),
  onShow: (uuid) => mark(`#/entities/${uuid}`),
});
stream.connect();

// Tabs: one panel shown at a time; the Rule Suggestions list, the Sigma catalogue, the ATT&CK
// matrix, the signals and the exceptions reload each time they are opened.
const tabs = [...document.querySelectorAll('.tabs [role=tab]')];
const viewOf = (tab) => tab.getAttribute('aria-controls');

function select(view) {
  const tab = tabs.find((t) => viewOf(t) === view) || tabs[0];
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute('aria-selected', String(on));
    document.getElementById(viewOf(t)).hidden = !on;
  }
  if (tab.id === 'tab-suggestions') suggestions.load();
  if (tab.id === 'tab-attack') attack.load();
  if (tab.id === 'tab-exceptions') exceptions.load();
  if (tab.id === 'tab-signals') signals.load();
  if (tab.id === 'tab-rules') rules.load();
  if (tab.id === 'tab-hunt') document.getElementById('hunt-query').focus();
  if (tab.id === 'tab-entities') document.getElementById('entity-q').focus();
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
  const [, kind, id] = decodeURIComponent(location.hash).match(/^#\/([a-z]+)(?:\/(.+))?$/) || [];
  if (kind === 'alerts' && id) {
    select('monitor');
    alerts.open(id);
  } else if (kind === 'entities' && id) {
    select('entities');
    entities.show(id);
  } else if (kind && tabs.some((t) => viewOf(t) === kind)) {
    select(kind);
  }
}
window.addEventListener('hashchange', route);
route();
