// The REST API under /api/v1: the same endpoints every integration uses.

const BASE = '/api/v1';

/** An answer that was not a success, with the API's error shape. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error;
    this.field = body && body.field;
    this.body = body;
    this.retryAfter = null;
  }
}

async function call(method, path, body) {
  const init = {method, headers: {accept: 'application/json'}};
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(BASE + path, init);
  } catch {
    // No answer at all: every widget says the same plain thing.
    throw new ApiError(0, {error: 'unreachable', message: 'the service did not answer (is it running?)'});
  }
  const text = await res.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!res.ok) {
    const err = new ApiError(res.status, parsed);
    err.retryAfter = Number(res.headers.get('retry-after')) || null;
    // A refusal for rate already says when to try again ("...; retry in 2 s"), and every widget
    // shows e.message: nothing to add here.
    throw err;
  }
  return parsed;
}

/** GET with query parameters (undefined and empty values left out). */
export function get(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return call('GET', s ? `${path}?${s}` : path);
}

/** PATCH a JSON body. */
export function patch(path, body) {
  return call('PATCH', path, body);
}

/** POST a JSON body. */
export function post(path, body) {
  return call('POST', path, body);
}

/** DELETE. */
export function del(path) {
  return call('DELETE', path);
}

/** A failed call as a widget says it: what failed, then the API's own words (a refusal for rate
 * names its wait, a 503 its missing component). */
export function failure(what, e) {
  return `${what}: ${e.message}`;
}
