// Headless Chromium for the browser tests, started the way every one of them needs.
//
// scripts/test runs the suite a second time a week ahead under libfaketime, which Chromium's
// processes cannot run under: the browser then gets the real clock (the preload is dropped from
// its environment), and a test that compares the page's time with the service's installs this
// process's faked time in the page (`fakedClock`).

import {chromium} from 'playwright-core';

/** Whether this process runs under libfaketime. */
export const fakedClock = (process.env.LD_PRELOAD || '').includes('faketime');

/** Chromium (`$CHROMIUM`, else /usr/bin/chromium), headless, without the preload. */
export function launchChromium() {
  const env = {...process.env};
  if (fakedClock) delete env.LD_PRELOAD;
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    env,
  });
}
