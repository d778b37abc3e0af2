// The header: service health, ingestion rates, alert counts and the stream's state.

import {get} from './api.js';
import {h, fill} from './dom.js';
import {count, rate} from './format.js';

const HEALTH_EVERY_MS = 10000;
const STATS_EVERY_MS = 5000;

export function mountStatus(root, stream) {
  const health = h('span', {class: 'pill', id: 'health', title: 'GET /api/v1/health'}, '…');
  const ingest = h('span', {class: 'metric', id: 'rate'}, '');
  const alerts = h('span', {class: 'metric', id: 'alert-count'}, '');
  const socket = h('span', {class: 'pill', id: 'stream-state'}, 'stream: connecting');
  let dropped = 0;
  /** This node's roles in a fleet (null alone): a node that is not a sensor stores no events,
   * and its header says what it does instead. */
  let roles = null;
  get('/cluster').then((c) => { if (c.status !== 'standalone') roles = c.roles || []; }).catch(() => {});
  fill(root, health, ingest, alerts, socket);

  async function pollHealth() {
    try {
      const body = await get('/health');
      setHealth(body.status, (body.degraded || []).join(', '));
    } catch (e) {
      // 503 carries the same body; anything else means the service is out of reach.
      if (e.status === 503 && e.body) setHealth('degraded', (e.body.degraded || []).join(', '));
      else setHealth('unreachable', e.message);
    }
  }

  function setHealth(status, detail) {
    health.className = `pill pill-${status === 'ok' ? 'ok' : 'bad'}`;
    fill(health, `health: ${status}`);
    health.title = detail ? `degraded: ${detail}` : 'all components ok';
  }

  async function pollStats() {
    try {
      const s = await get('/stats');
      const fleet = s.cluster;
      if (roles && fleet && !roles.includes('sensor')) {
        fill(ingest, roles.includes('console')
          ? `fleet console · ${count(fleet.alerts_received)} alerts received`
          : `detector · ${count(fleet.records_scored)} records scored`);
      } else {
        fill(ingest, `${rate(s.rates && s.rates.stored_per_s)} events/s · ${count(s.stored_total)} stored`);
      }
      const a = (s.detection && s.detection.alerts) || {};
      const total = Object.values(a).reduce((x, y) => x + Number(y || 0), 0);
      fill(alerts, `${count(total)} alerts since start`);
      alerts.title = Object.entries(a).map(([k, v]) => `${k}: ${v}`).join(', ');
    } catch (e) {
      fill(ingest, 'stats unavailable');
    }
  }

  stream.on('state', ({state, detail}) => {
    socket.className = `pill pill-${state === 'open' ? 'ok' : 'bad'}`;
    fill(socket, `stream: ${state}`);
    socket.title = detail || '';
  });
  stream.on('status', (f) => {
    dropped = Number(f.dropped_total || 0);
    if (stream.state === 'open') {
      fill(socket, dropped ? `stream: open · ${count(dropped)} dropped` : 'stream: open');
      socket.title = `${f.connections}/${f.max_connections} clients, queue ${f.queued}/${f.queue_max}`;
    }
  });

  pollHealth();
  pollStats();
  setInterval(pollHealth, HEALTH_EVERY_MS);
  setInterval(pollStats, STATS_EVERY_MS);
}
