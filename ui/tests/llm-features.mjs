// Drives the dashboard's LLM features in headless Chromium against a running Watchpost whose
// LLM backend is up (any backend): an alert's Explain button shows the model's explanation, a
// hunt question the model translates lists events, and a confirmed pattern gets a validated
// Sigma draft. Screenshots go to OUT_DIR.
//
// Usage: node llm-features.mjs BASE_URL OUT_DIR
// The service must hold at least one alert, and a pattern eligible for a draft.

import {launchChromium} from './browser.mjs';
import {mkdirSync} from 'node:fs';

const [base, out] = process.argv.slice(2);
if (!base || !out) {
  console.error('usage: node llm-features.mjs BASE_URL OUT_DIR');
  process.exit(2);
}
mkdirSync(out, {recursive: true});
// Nothing here compares the page's time with the service's (browser.mjs).
const browser = await launchChromium();
const problems = [];
const summary = {};
const expect = (ok, what) => { if (!ok) throw new Error(what); };
try {
  const page = await browser.newPage({viewport: {width: 1440, height: 900}, colorScheme: 'dark'});
  // An alert without a cached explanation answers 404 to its GET, which the browser logs.
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().includes('status of 404')) problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  // A small model on two cores takes seconds per answer.
  page.setDefaultTimeout(180000);
  const alerts = await (await fetch(`${base}/api/v1/alerts?type=sigma`)).json();
  expect(alerts.items.length > 0, 'no alert to explain');
  const id = alerts.items[0].id;
  await page.goto(`${base}/#/alerts/${id}`);
  await page.waitForSelector('#explain:not([hidden])');
  const t0 = Date.now();
  await page.click('#explain');
  // Asked afresh (a cached explanation may have shown first): the note names the model and no
  // cache once the answer is in.
  await page.waitForFunction(() => {
    const e = document.getElementById('explanation');
    const note = document.querySelector('#explain + [role=status]');
    return e && !e.querySelector('.plain-summary') && e.textContent.trim().length > 40
      && note && note.textContent.startsWith('Written by') && !note.textContent.includes('cache');
  });
  summary.explained_by = await page.locator('#explain + [role=status]').textContent();
  summary.explain_ms = Date.now() - t0;
  summary.explanation = (await page.locator('#explanation').textContent()).slice(0, 200);
  await page.screenshot({path: `${out}/explain.png`});
  await page.click('#detail .close');

  await page.click('#tab-hunt');
  await page.fill('#hunt-query', 'which ssh logins failed in the last day?');
  await page.check('#hunt input[type=checkbox]');
  const t1 = Date.now();
  await page.click('#hunt button[type=submit]');
  await page.waitForFunction(() => {
    const s = document.getElementById('hunt-summary');
    const e = document.getElementById('hunt-error');
    return (s && s.textContent.includes('Translated')) || (e && e.textContent.trim());
  });
  summary.hunt_ms = Date.now() - t1;
  summary.hunt = await page.locator('#hunt-result').textContent();
  expect(summary.hunt.includes('Translated'), `hunt: ${summary.hunt}`);
  await page.screenshot({path: `${out}/hunt.png`});

  await page.click('#tab-suggestions');
  await page.waitForSelector('#suggestion-rows button.draft:not([disabled])');
  const t2 = Date.now();
  await page.click('#suggestion-rows button.draft');
  await page.waitForFunction(() => document.getElementById('suggestion-yaml')?.value?.includes('detection:'));
  summary.draft = (await page.locator('#suggestion-yaml').inputValue()).slice(0, 300);
  summary.draft_ms = Date.now() - t2;
  await page.screenshot({path: `${out}/draft.png`});
} catch (e) {
  problems.push(e.message);
} finally {
  await browser.close();
}
console.log(JSON.stringify({summary, problems}, null, 1));
process.exit(problems.length ? 1 : 0);
