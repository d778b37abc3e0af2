// The dashboard's layout of one's own: the spec's six widgets on one board, each of which can be
// removed, added back, moved (drag its title onto another widget, or its arrow buttons), made
// half or full width, and shorter or taller where its content scrolls. The layout is kept in the
// browser's local storage, under the analyst's name when the page knows it (the name remembered
// for exceptions), so that analysts sharing a browser profile keep theirs; "Reset layout" goes
// back to the default.

import {fill, h, stored} from './dom.js';

/**
 * The widgets, in the default order, with their default size. A height is the most a widget
 * takes (it shrinks to what it holds, and its lists scroll inside it past that), in steps of the
 * window's height: at 1440x900 the timeline, the feed and the stream fit the first screen, and
 * the whole board about two (it was 3,450 px of fixed heights, most of them empty on a new
 * install). The Entity Explorer sizes itself to the entity shown.
 */
export const WIDGETS = [
  {id: 'timeline', title: 'Anomaly Timeline', width: 'full', height: 'auto'},
  {id: 'alerts', title: 'Alert Feed', width: 'half', height: 'm'},
  {id: 'events', title: 'Live Event Stream', width: 'half', height: 'm'},
  {id: 'entities', title: 'Entity Explorer', width: 'full', height: 'auto'},
  {id: 'attack', title: 'ATT&CK Heatmap', width: 'full', height: 'm'},
  {id: 'rules', title: 'Sigma Rules', width: 'full', height: 'm'},
];
/** Heights a widget can take; `auto` fits its content and is not offered for resizing. */
const HEIGHTS = ['s', 'm', 'l'];
const HEIGHT_NAMES = {s: 'short', m: 'medium', l: 'tall'};
const AUTHOR_KEY = 'watchpost.author';

/** The storage key of this analyst's layout. */
export function layoutKey() {
  const who = (stored.get(AUTHOR_KEY) || '').trim();
  return who ? `watchpost.layout:${who}` : 'watchpost.layout';
}

function defaults() {
  return WIDGETS.map(({id, width, height}) => ({id, width, height}));
}

/** The saved layout, or the default when none is saved or it does not read. */
function restore() {
  try {
    const saved = JSON.parse(stored.get(layoutKey()) || 'null');
    if (!Array.isArray(saved)) return defaults();
    const known = new Map(WIDGETS.map((w) => [w.id, w]));
    const seen = new Set();
    const out = [];
    for (const item of saved) {
      const w = item && known.get(item.id);
      if (!w || seen.has(w.id)) continue;
      seen.add(w.id);
      out.push({id: w.id, width: item.width === 'half' ? 'half' : 'full',
        height: w.height === 'auto' ? 'auto' : (HEIGHTS.includes(item.height) ? item.height : w.height)});
    }
    return out;
  } catch {
    return defaults();
  }
}

/**
 * Arranges the widget sections of `board` (`section[data-widget]`) as laid out, and puts the
 * board's own controls into `controls`. `onShown(id)` runs when a widget comes (back) on the
 * board, so that it can load.
 */
export function mountLayout(board, controls, {onShown} = {}) {
  let layout = restore();
  const sections = new Map([...board.querySelectorAll('section[data-widget]')].map((s) => [s.dataset.widget, s]));
  const add = h('select', {id: 'layout-add', 'aria-label': 'Add a widget', on: {change: () => {
    if (add.value) show(add.value, {top: false});
    add.value = '';
  }}});
  const reset = h('button', {type: 'button', id: 'layout-reset', class: 'secondary',
    title: 'Back to the default widgets, order and sizes', on: {click: () => {
      layout = defaults();
      save();
      apply();
    }}}, 'Reset layout');
  const status = h('span', {class: 'visually-hidden', role: 'status', id: 'layout-status'});
  controls.append(add, reset, status);

  for (const [id, section] of sections) decorate(id, section);
  apply();

  /** Adds the widget's own controls to its title bar. */
  function decorate(id, section) {
    const title = WIDGETS.find((w) => w.id === id).title;
    const heading = section.querySelector('h2');
    const button = (cls, label, text, action) => h('button', {type: 'button', class: `tool ${cls}`,
      'aria-label': `${label} ${title}`, title: label, on: {click: action}}, text);
    const tools = h('span', {class: 'widget-tools'},
      button('move-up', 'Move earlier:', '◀', () => move(id, -1)),
      button('move-down', 'Move later:', '▶', () => move(id, 1)),
      button('width', 'Half or full width:', '⇔', () => resize(id, 'width')),
      WIDGETS.find((w) => w.id === id).height === 'auto' ? null
        : button('height', 'Shorter or taller:', '↕', () => resize(id, 'height')),
      button('remove', 'Remove', '×', () => remove(id)));
    const bar = h('div', {class: 'widget-bar'});
    heading.replaceWith(bar);
    bar.append(heading, tools);
    // Dragging by the title bar: dropped on another widget, it takes that one's place.
    bar.draggable = true;
    bar.addEventListener('dragstart', (e) => {
      e.dataTransfer.setData('text/x-watchpost-widget', id);
      e.dataTransfer.effectAllowed = 'move';
      section.classList.add('dragging');
    });
    bar.addEventListener('dragend', () => section.classList.remove('dragging'));
    section.addEventListener('dragover', (e) => {
      if ([...e.dataTransfer.types].includes('text/x-watchpost-widget')) {
        e.preventDefault();
        section.classList.add('drop-target');
      }
    });
    section.addEventListener('dragleave', () => section.classList.remove('drop-target'));
    section.addEventListener('drop', (e) => {
      e.preventDefault();
      section.classList.remove('drop-target');
      const moved = e.dataTransfer.getData('text/x-watchpost-widget');
      if (moved && moved !== id) place(moved, id);
    });
  }

  function index(id) {
    return layout.findIndex((w) => w.id === id);
  }

  function move(id, by) {
    const i = index(id);
    const j = i + by;
    if (i < 0 || j < 0 || j >= layout.length) return;
    [layout[i], layout[j]] = [layout[j], layout[i]];
    commit(`${titleOf(id)} moved to place ${j + 1} of ${layout.length}`);
    // Back on the arrow pressed, or on the other one once this end is reached (it is disabled).
    const section = sections.get(id);
    const pressed = section.querySelector(by < 0 ? '.move-up' : '.move-down');
    (pressed.disabled ? section.querySelector(by < 0 ? '.move-down' : '.move-up') : pressed).focus();
  }

  /** Puts `moved` where `target` is. */
  function place(moved, target) {
    const downward = index(moved) < index(target);
    const [item] = layout.splice(index(moved), 1);
    layout.splice(index(target) + (downward ? 1 : 0), 0, item);
    commit(`${titleOf(moved)} moved to place ${index(moved) + 1} of ${layout.length}`);
  }

  function resize(id, what) {
    const w = layout[index(id)];
    if (what === 'width') w.width = w.width === 'full' ? 'half' : 'full';
    else w.height = HEIGHTS[(HEIGHTS.indexOf(w.height) + 1) % HEIGHTS.length];
    commit(`${titleOf(id)}: ${w.width} width${w.height === 'auto' ? '' : `, ${HEIGHT_NAMES[w.height]}`}`);
    sections.get(id).querySelector(`.${what}`).focus();
    // Charts size themselves from their box: tell them it changed.
    window.dispatchEvent(new Event('resize'));
  }

  function remove(id) {
    layout.splice(index(id), 1);
    commit(`${titleOf(id)} removed; add it back from "Add widget"`);
    add.focus();
  }

  /** Puts widget `id` on the board when it is not (first, or last), and scrolls to it. */
  function show(id, {top = true} = {}) {
    if (index(id) < 0) {
      const w = WIDGETS.find((x) => x.id === id);
      const item = {id, width: w.width, height: w.height};
      if (top) layout.unshift(item);
      else layout.push(item);
      commit(`${w.title} added`);
      if (onShown) onShown(id);
    }
    sections.get(id).scrollIntoView({block: 'start'});
  }

  function commit(message) {
    save();
    apply();
    fill(status, message);
  }

  function save() {
    stored.set(layoutKey(), JSON.stringify(layout));
  }

  function apply() {
    const on = new Set(layout.map((w) => w.id));
    // Sections are moved only where the order changed: moving one drops its focus.
    let previous = board.querySelector('.board-empty');
    for (const w of layout) {
      const s = sections.get(w.id);
      s.hidden = false;
      s.classList.remove('w-full', 'w-half', 'h-s', 'h-m', 'h-l', 'h-auto');
      s.classList.add(`w-${w.width}`, `h-${w.height}`);
      if (previous.nextElementSibling !== s) previous.after(s);
      previous = s;
    }
    for (const [id, s] of sections) if (!on.has(id)) s.hidden = true;
    for (const w of layout) {
      const s = sections.get(w.id);
      s.querySelector('.move-up').disabled = index(w.id) === 0;
      s.querySelector('.move-down').disabled = index(w.id) === layout.length - 1;
    }
    const off = WIDGETS.filter((w) => !on.has(w.id));
    fill(add, h('option', {value: ''}, off.length ? 'Add widget…' : 'All widgets shown'),
      off.map((w) => h('option', {value: w.id}, w.title)));
    add.disabled = off.length === 0;
    board.classList.toggle('empty', layout.length === 0);
  }

  function titleOf(id) {
    return WIDGETS.find((w) => w.id === id).title;
  }

  return {show, has: (id) => index(id) >= 0};
}
