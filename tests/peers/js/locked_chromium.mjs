// Debian's Chromium (driven by playwright-core) locked to one origin, for the browser tests'
// drivers (browser_click.mjs, dashboard_tour.mjs): background networking (updates, safe browsing,
// sync, metrics) is off, the host resolver maps every name but 127.0.0.1 to nothing, and the
// context aborts every request that leaves `origin`, reporting it to `onBlocked`.
// The binary: $PORTICO_TEST_CHROMIUM, else /usr/bin/chromium.

import process from 'node:process';
import { chromium } from 'playwright-core';

export async function launchLocked({ timeoutMs }) {
  return chromium.launch({
    executablePath: process.env.PORTICO_TEST_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    // Root (CI containers) cannot use Chromium's user-namespace sandbox.
    chromiumSandbox: process.getuid?.() !== 0,
    timeout: timeoutMs,
    args: [
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-default-apps',
      '--disable-domain-reliability',
      '--disable-client-side-phishing-detection',
      '--metrics-recording-only',
      '--no-first-run',
      '--no-default-browser-check',
      '--no-proxy-server',
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
    ],
  });
}

/// A new context of `browser` whose requests may reach only `origin`: `onAllowed(url)` hears each
/// allowed request, `onBlocked(url)` each aborted one.
export async function lockedContext(browser, { origin, timeoutMs, contextOptions = {}, onAllowed = () => {}, onBlocked }) {
  const context = await browser.newContext({ serviceWorkers: 'block', ...contextOptions });
  context.setDefaultTimeout(timeoutMs);
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (new URL(url).origin === origin) {
      onAllowed(url);
      return route.continue();
    }
    onBlocked(url);
    return route.abort('blockedbyclient');
  });
  return context;
}
