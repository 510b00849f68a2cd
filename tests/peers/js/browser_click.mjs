#!/usr/bin/env node
// Opens one URL in headless Chromium (Debian's, driven by playwright-core), then runs the steps given,
// in their order, on the current tab: types into inputs found by their label (accessible name),
// clicks buttons found by their accessible name, waits for texts to appear, reloads the tab, or opens
// the current tab's URL in a new tab of the same browser context (which then becomes current). It
// prints ONE JSON line on stdout saying what happened:
//
//   {"ok": true|false, "status": <HTTP status of the first navigation>, "url": <current tab's final
//    URL>, "title", "clicked": <last label clicked or null>, "found": <whether every --expect-text
//    appeared; null without one>, "missing": [<texts that did not>],
//    "text": <the current tab's visible text at the end>,
//    "tabs": [{"url", "text", "storage": <sessionStorage keys>}] (every tab, in opening order),
//    "cookies": [{name, httpOnly, sameSite, path}],
//    "requests": [<every URL the page asked for>], "blocked": [<URLs refused for leaving the origin>],
//    "consoleErrors": [...], "error": <message, when ok is false>}
//
//   node js/browser_click.mjs --url URL [--fill LABEL=TEXT | --click LABEL | --expect-text TEXT |
//        --reload EXPECTED_TEXT | --new-tab EXPECTED_TEXT]... [--timeout-ms N]
//
// Chromium is given only this URL and may reach only its origin (127.0.0.1 in the tests): every
// other request is aborted and listed in "blocked", background networking (updates, safe browsing,
// sync, metrics) is off, and the host resolver maps every name but 127.0.0.1 to nothing.
// The binary: $PORTICO_TEST_CHROMIUM, else /usr/bin/chromium. Exit 0 when ok, 1 when not, 2 on
// bad arguments.

import process from 'node:process';
import { launchLocked, lockedContext } from './locked_chromium.mjs';

function parseArgs(argv) {
  const options = { steps: [], timeoutMs: 15000 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (value === undefined) usage(`${flag} needs a value`);
    i++;
    switch (flag) {
      case '--url': options.url = value; break;
      case '--click': options.steps.push({ click: value }); break;
      case '--expect-text': options.steps.push({ expect: value }); break;
      case '--reload': options.steps.push({ reload: true }, { expect: value }); break;
      case '--new-tab': options.steps.push({ newTab: true }, { expect: value }); break;
      case '--timeout-ms': options.timeoutMs = Number(value); break;
      case '--fill': {
        const at = value.indexOf('=');
        if (at < 1) usage(`--fill wants LABEL=TEXT, got ${value}`);
        options.steps.push({ fill: [value.slice(0, at), value.slice(at + 1)] });
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
  ok: false, status: null, url: null, title: null, clicked: null, found: null, missing: [], text: null,
  tabs: [], cookies: [], requests: [], blocked: [], consoleErrors: [],
};

let browser;
try {
  browser = await launchLocked({ timeoutMs: options.timeoutMs });
  const context = await lockedContext(browser, {
    origin, timeoutMs: options.timeoutMs, onAllowed: (url) => report.requests.push(url), onBlocked: (url) => report.blocked.push(url),
  });
  const tabs = [];
  const open = async () => {
    const page = await context.newPage();
    page.on('console', (message) => {
      if (message.type() === 'error') report.consoleErrors.push(message.text());
    });
    page.on('pageerror', (error) => report.consoleErrors.push(String(error)));
    tabs.push(page);
    return page;
  };
  let page = await open();
  const response = await page.goto(options.url, { waitUntil: 'load' });
  report.status = response ? response.status() : null;
  for (const step of options.steps) {
    if (step.fill) {
      await page.getByLabel(step.fill[0], { exact: true }).fill(step.fill[1]);
    } else if (step.click) {
      await page.getByRole('button', { name: step.click, exact: true }).click();
      report.clicked = step.click;
    } else if (step.reload) {
      await page.reload({ waitUntil: 'load' });
    } else if (step.newTab) {
      const url = page.url();
      page = await open();
      await page.goto(url, { waitUntil: 'load' });
    } else if (step.expect) {
      try {
        await page.getByText(step.expect).first().waitFor({ state: 'visible' });
        report.found = report.found !== false;
      } catch {
        report.found = false;
        report.missing.push(step.expect);
      }
    }
  }
  report.url = page.url();
  report.title = await page.title();
  report.text = await page.locator('body').innerText();
  for (const tab of tabs) {
    report.tabs.push({
      url: tab.url(),
      text: await tab.locator('body').innerText(),
      storage: await tab.evaluate(() => Object.keys(sessionStorage)),
    });
  }
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
