// Boots the dashboard: one stream shared by every widget, then the widgets.

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

const stream = new Stream();
mountStatus(document.getElementById('status'), stream);
const alerts = mountAlerts(document.getElementById('alerts'), document.getElementById('detail'), stream);
mountTimeline(document.querySelector('#timeline'), stream, {onAlert: (id) => alerts.open(id)});
mountEvents(document.getElementById('events'), stream);
mountHunt(document.querySelector('#hunt .widget'));
const suggestions = mountSuggestions(document.querySelector('#suggestions .widget'));
const attack = mountAttack(document.querySelector('#attack .widget'));
const exceptions = mountExceptions(document.querySelector('#exceptions .widget'));
const signals = mountSignals(document.querySelector('#signals .widget'));
const rules = mountRules(document.querySelector('#rules .widget'));
stream.connect();

// Tabs: one panel shown at a time; the Rule Suggestions list, the Sigma catalogue, the ATT&CK
// matrix, the signals and the exceptions reload each time they are opened.
const tabs = [...document.querySelectorAll('.tabs [role=tab]')];
for (const tab of tabs) {
  tab.addEventListener('click', () => {
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute('aria-selected', String(on));
      document.getElementById(t.getAttribute('aria-controls')).hidden = !on;
    }
    if (tab.id === 'tab-suggestions') suggestions.load();
    if (tab.id === 'tab-attack') attack.load();
    if (tab.id === 'tab-exceptions') exceptions.load();
    if (tab.id === 'tab-signals') signals.load();
    if (tab.id === 'tab-rules') rules.load();
    if (tab.id === 'tab-hunt') document.getElementById('hunt-query').focus();
  });
}
