// How long the dashboard takes to show something and to be full, measured by Chromium's own
// clock: first contentful paint, then the moment each widget holds its data, and every API call
// the page made with its duration. For the figures of docs/dashboard.md on a large store.
//
// Usage: node render-timing.mjs BASE_URL [RUNS]
// Prints one JSON line per run (a fresh page each, cache disabled) and a summary line.

import {launchChromium} from './browser.mjs';

const [base, runsArg] = process.argv.slice(2);
if (!base) {
  console.error('usage: node render-timing.mjs BASE_URL [RUNS]');
  process.exit(2);
}
const runs = Number(runsArg || 3);

const browser = await launchChromium();

/** Each widget's "holds its data" test, as the page shows it. */
const READY = {
  alert_feed: () => document.querySelectorAll('#alert-rows tr').length > 0,
  anomaly_timeline: () => /\d[\d,]* events?, /.test(document.getElementById('timeline-summary')?.textContent || ''),
  attack_heatmap: () => document.querySelectorAll('#attack-matrix .tactic').length >= 12,
  sigma_rules: () => document.querySelectorAll('#rules-rows tr').length > 0,
  status_bar: () => (document.getElementById('health')?.textContent || '').startsWith('health:'),
  stream: () => (document.getElementById('stream-state')?.textContent || '').startsWith('stream: open'),
};

const results = [];
try {
  for (let run = 0; run < runs; run++) {
    const context = await browser.newContext({viewport: {width: 1440, height: 900}, colorScheme: 'dark'});
    const page = await context.newPage();
    const cdp = await context.newCDPSession(page);
    await cdp.send('Network.setCacheDisabled', {cacheDisabled: true});
    await page.goto(`${base}/`, {waitUntil: 'commit'});
    const ready = {};
    await Promise.all(Object.entries(READY).map(async ([name, test]) => {
      await page.waitForFunction(test, null, {timeout: 60000, polling: 20});
      ready[name] = Math.round(await page.evaluate(() => performance.now()));
    }));
    const timing = await page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0];
      const fcp = performance.getEntriesByName('first-contentful-paint')[0];
      const api = performance.getEntriesByType('resource')
        .filter((r) => r.name.includes('/api/v1/'))
        .map((r) => ({path: new URL(r.name).pathname + new URL(r.name).search, ms: Math.round(r.duration),
          bytes: r.transferSize}));
      const assets = performance.getEntriesByType('resource')
        .filter((r) => r.name.includes('/assets/'))
        .reduce((n, r) => n + r.transferSize, 0);
      return {dom_content_loaded: Math.round(nav.domContentLoadedEventEnd),
        first_contentful_paint: fcp ? Math.round(fcp.startTime) : null, api, asset_bytes: assets};
    });
    const result = {run, ...timing, ready, populated: Math.max(...Object.values(ready))};
    results.push(result);
    console.log(JSON.stringify(result));
    await context.close();
  }
  const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(JSON.stringify({
    runs,
    first_contentful_paint_median: median(results.map((r) => r.first_contentful_paint)),
    populated_median: median(results.map((r) => r.populated)),
    ready_median: Object.fromEntries(Object.keys(READY).map((k) => [k, median(results.map((r) => r.ready[k]))])),
  }));
} finally {
  await browser.close();
}
