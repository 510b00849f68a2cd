#!/usr/bin/env node
// Opens one URL in headless Chromium (Debian's, driven by playwright-core), optionally types into
// inputs found by their label (accessible name), optionally clicks a button found by its accessible
// name, optionally waits for a text to appear, and prints ONE JSON
// line on stdout saying what happened:
//
//   {"ok": true|false, "status": <HTTP status of the navigation>, "url": <final URL>, "title",
//    "clicked": <label or null>, "found": <whether --expect-text appeared>,
//    "text": <the page's visible text at the end>, "cookies": [{name, httpOnly, sameSite, path}],
//    "requests": [<every URL the page asked for>], "blocked": [<URLs refused for leaving the origin>],
//    "consoleErrors": [...], "error": <message, when ok is false>}
//
//   node js/browser_click.mjs --url URL [--fill LABEL=TEXT]... [--click LABEL] \
//        [--expect-text TEXT] [--timeout-ms N]
//
// Chromium is given only this URL and may reach only its origin (127.0.0.1 in the tests): every
// other request is aborted and listed in "blocked", background networking (updates, safe browsing,
// sync, metrics) is off, and the host resolver maps every name but 127.0.0.1 to nothing.
// The binary: $PORTICO_TEST_CHROMIUM, else /usr/bin/chromium. Exit 0 when ok, 1 when not, 2 on
// bad arguments.

import process from 'node:process';
import { chromium } from 'playwright-core';

function parseArgs(argv) {
  const options = { fills: [], timeoutMs: 15000 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (value === undefined) usage(`${flag} needs a value`);
    i++;
    switch (flag) {
      case '--url': options.url = value; break;
      case '--click': options.click = value; break;
      case '--expect-text': options.expectText = value; break;
      case '--timeout-ms': options.timeoutMs = Number(value); break;
      case '--fill': {
        const at = value.indexOf('=');
        if (at < 1) usage(`--fill wants LABEL=TEXT, got ${value}`);
        options.fills.push([value.slice(0, at), value.slice(at + 1)]);
        break;
      }
      default: usage(`unknown argument ${flag}`);
    }
  }
  if (!options.url) usage('--url is required');
  if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0) usage('--timeout-ms wants a positive number');
  return options;
}

function usage(message) {
  process.stderr.write(`browser_click: ${message}\n`);
  process.exit(2);
}

const options = parseArgs(process.argv.slice(2));
const origin = new URL(options.url).origin;
const report = {
  ok: false, status: null, url: null, title: null, clicked: null, found: null, text: null,
  cookies: [], requests: [], blocked: [], consoleErrors: [],
};

const executablePath = process.env.PORTICO_TEST_CHROMIUM || '/usr/bin/chromium';
let browser;
try {
  browser = await chromium.launch({
    executablePath,
    headless: true,
    // Root (CI containers) cannot use Chromium's user-namespace sandbox.
    chromiumSandbox: process.getuid?.() !== 0,
    timeout: options.timeoutMs,
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
  const context = await browser.newContext({ serviceWorkers: 'block' });
  context.setDefaultTimeout(options.timeoutMs);
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (new URL(url).origin === origin) {
      report.requests.push(url);
      return route.continue();
    }
    report.blocked.push(url);
    return route.abort('blockedbyclient');
  });
  const page = await context.newPage();
  page.on('console', (message) => {
    if (message.type() === 'error') report.consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => report.consoleErrors.push(String(error)));
  const response = await page.goto(options.url, { waitUntil: 'load' });
  report.status = response ? response.status() : null;
  for (const [label, text] of options.fills) {
    await page.getByLabel(label, { exact: true }).fill(text);
  }
  if (options.click) {
    await page.getByRole('button', { name: options.click, exact: true }).click();
    report.clicked = options.click;
  }
  if (options.expectText) {
    try {
      await page.getByText(options.expectText).first().waitFor({ state: 'visible' });
      report.found = true;
    } catch {
      report.found = false;
    }
  }
  report.url = page.url();
  report.title = await page.title();
  report.text = await page.locator('body').innerText();
  report.cookies = (await context.cookies()).map(({ name, httpOnly, sameSite, path }) => ({
    name, httpOnly, sameSite, path,
  }));
  report.ok = report.found !== false;
} catch (error) {
  report.error = String(error && error.message ? error.message : error);
} finally {
  if (browser) await browser.close().catch(() => {});
}
process.stdout.write(`${JSON.stringify(report)}\n`);
process.exit(report.ok ? 0 : 1);
