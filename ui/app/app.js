// Boots the dashboard: one stream shared by every widget, then the widgets.

import {Stream} from './stream.js';
import {mountStatus} from './status.js';
import {mountAlerts} from './alerts.js';
import {mountEvents} from './events.js';

const stream = new Stream();
mountStatus(document.getElementById('status'), stream);
mountAlerts(document.getElementById('alerts'), document.getElementById('detail'), stream);
mountEvents(document.getElementById('events'), stream);
stream.connect();
