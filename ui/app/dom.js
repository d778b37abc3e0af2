// Building the page without HTML strings. The content-security policy enforces Trusted Types
// with no policy allowed, so any sink that parses HTML from a string would throw: every node is
// made here, and every piece of data (log lines are attacker-controlled) goes in as text.

/**
 * An element: `h('td', {class: 'sev', title: 'x', on: {click: f}}, 'text', child, ...)`.
 * Children that are null, undefined or false are skipped; strings and numbers become text.
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'on') {
      for (const [type, handler] of Object.entries(value)) el.addEventListener(type, handler);
    } else if (key === 'class') {
      el.className = value;
    } else if (key === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (key in el && typeof value !== 'string') {
      el[key] = value;
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces everything inside `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** `fn`, run once input has paused for `ms` (typing in a search box, resizing the window). */
export function debounce(fn, ms) {
  let timer = null;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
}

/**
 * The browser's local storage, where it may fail: a profile that blocks storage throws on every
 * access, a full one on writes. Preferences are conveniences, so a failure reads as "none saved"
 * and a write that fails is dropped (the page works as it would on first use).
 */
export const stored = {
  get(key) {
    try {
      return localStorage.getItem(key);
    } catch {
      return null;
    }
  },
  set(key, value) {
    try {
      if (value === null) localStorage.removeItem(key);
      else localStorage.setItem(key, value);
    } catch {
      // Not kept: see above.
    }
  },
};
