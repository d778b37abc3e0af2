// The one WebSocket stream (/api/v1/ws): reconnects with backoff, hands each frame to whoever
// listens for its type, and remembers the filter so a reconnect restores it.
//
// A filter takes effect on the server when it acknowledges it (a `status` frame with reason
// `filter`; it may hold a filter for `ws_filter_min_interval_ms`). Event frames that arrive in
// between were chosen by the previous filter, so they are not handed on: what the page shows
// always matches the filter it shows.

const MAX_BACKOFF_MS = 10000;
const STABLE_AFTER_MS = 5000;

/** A filter as the server echoes it: every field present, null when unset. */
function canonical(f) {
  return JSON.stringify([
    f && f.min_severity != null ? f.min_severity : null,
    f && f.source != null ? f.source : null,
    f && f.entity != null ? String(f.entity).toLowerCase() : null,
  ]);
}

function sameFilter(a, b) {
  return canonical(a) === canonical(b);
}

/** The server's echo of a filter, as a filter to send (unset fields left out). */
function fromServer(f) {
  const out = {};
  if (f && f.min_severity != null) out.min_severity = f.min_severity;
  if (f && f.source != null) out.source = f.source;
  if (f && f.entity != null) out.entity = f.entity;
  return out;
}

export class Stream {
  constructor() {
    this.listeners = new Map();
    this.filter = null;
    this.state = 'connecting';
    this.backoff = 500;
    this.socket = null;
    // `filter` is the one last sent; the server has yet to acknowledge it while `filterPending`;
    // `inForce` is the one its latest status frame reported.
    this.filterPending = false;
    this.inForce = null;
    this.stable = null;
  }

  /** Calls `fn(frame)` for every frame of `type` ('state' for connection changes). */
  on(type, fn) {
    if (!this.listeners.has(type)) this.listeners.set(type, []);
    this.listeners.get(type).push(fn);
  }

  emit(type, value) {
    for (const fn of this.listeners.get(type) || []) {
      try {
        fn(value);
      } catch (e) {
        console.error(`stream listener for ${type}:`, e);
      }
    }
  }

  setState(state, detail) {
    this.state = state;
    this.emit('state', {state, detail});
  }

  connect() {
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const socket = new WebSocket(`${scheme}://${location.host}/api/v1/ws`);
    this.socket = socket;
    this.setState('connecting');
    socket.addEventListener('open', () => {
      // The backoff starts over only once a connection has lasted: a server that accepts and
      // then closes at once is not hammered every half second.
      this.stable = setTimeout(() => { this.backoff = 500; }, STABLE_AFTER_MS);
      this.filterPending = false;
      this.setState('open');
      if (this.filter) this.sendFilter(this.filter);
    });
    socket.addEventListener('message', (m) => {
      let frame;
      try {
        frame = JSON.parse(m.data);
      } catch {
        return;
      }
      if (!frame || typeof frame.type !== 'string') return;
      // Acknowledged (the filter in force is the one last sent: an earlier one may be
      // acknowledged first when two are sent within the server's interval), or refused (an
      // `error` frame: the previous filter stays in force, and is the one to restore later).
      if (frame.type === 'status' && frame.reason === 'filter' && sameFilter(frame.filter, this.filter)) {
        this.filterPending = false;
      }
      if (frame.type === 'status') this.inForce = frame.filter;
      if (frame.type === 'error' && this.filterPending) {
        this.filterPending = false;
        this.filter = fromServer(this.inForce);
        this.emit('filter', this.filter);
      }
      if (this.filterPending && (frame.type === 'event' || frame.type === 'batch')) return;
      this.emit(frame.type, frame);
    });
    socket.addEventListener('close', (c) => {
      if (this.socket !== socket) return;
      clearTimeout(this.stable);
      // 1008/1013 and refusals before the upgrade (403, 503) all end here; the reason, when
      // the server gave one, is shown, and the dashboard tries again later.
      this.setState('closed', c.reason || `code ${c.code}`);
      const wait = this.backoff;
      this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF_MS);
      setTimeout(() => this.connect(), wait);
    });
  }

  /** Sends a filter frame (and keeps it for reconnects). */
  sendFilter(filter) {
    this.filter = filter;
    this.emit('filter', filter);
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.filterPending = true;
      this.socket.send(JSON.stringify({type: 'filter', ...filter}));
    }
  }

  /** A filter other than "everything" is in force. */
  filtered() {
    return !!this.filter && Object.keys(this.filter).length > 0;
  }
}
