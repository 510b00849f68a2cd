#!/usr/bin/env node
// Drives Portico's dashboard through a balancer that terminates TLS (a self-signed certificate, so
// HTTPS errors are ignored), in headless Chromium (Debian's, driven by playwright-core, locked to
// the page's origin by locked_chromium.mjs): logs in through the form with TOKEN (a POST), then
// tries tool TOOL with JSON ARGS on the Tools page (a POST). Selects elements only by the
// dashboard contract's data-testid / data-* attributes. Prints ONE JSON line on stdout at the end:
//   {"ok", "error"?, "origin", "login": {"shown", "status", "loggedIn", "error"},
//    "cookie": {"secure", "httpOnly", "sameSite"} | null,
//    "tryIt": {"status", "outcome", "text"} | null, "failedRequests": [{"method", "path", "status"}],
//    "consoleErrors": [...], "blocked": [...]}
// A refused page is reported, not an error: the caller asserts on it. When the page's own script
// is refused (so no form is shown), the page POSTs the login itself (`fetch`, as the form does)
// and `login.error` is the answer's `error`.
//
//   node js/dashboard_balancer.mjs --url https://127.0.0.1:PORT --token TOKEN --try TOOL --try-args JSON
//        [--timeout-ms N]
//
// Exit 0 when the run completed (whatever it found), 1 when it broke, 2 on bad arguments.

import process from 'node:process';
import { launchLocked, lockedContext } from './locked_chromium.mjs';

function usage(message) {
  process.stderr.write(`dashboard_balancer: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const options = { timeoutMs: 20000 };
  const known = new Set(['--url', '--token', '--try', '--try-args', '--timeout-ms']);
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (!known.has(flag)) usage(`unknown argument ${flag}`);
    if (value === undefined) usage(`${flag} needs a value`);
    const key = flag.slice(2).replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    options[key] = key === 'timeoutMs' ? Number(value) : value;
  }
  for (const needed of ['url', 'token', 'try', 'tryArgs']) {
    if (options[needed] === undefined) usage(`--${needed.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} is required`);
  }
  return options;
}

const options = parseArgs(process.argv.slice(2));
const origin = new URL(options.url).origin;
const tid = (id) => `[data-testid="${id}"]`;
const report = { ok: false, origin, login: null, cookie: null, tryIt: null, failedRequests: [], consoleErrors: [], blocked: [] };
let phase = 'boot';

/// The status of the first response to `method path` from now on.
function statusOf(page, method, pathname) {
  return page.waitForResponse((response) => response.request().method() === method
    && new URL(response.url()).pathname === pathname).then((response) => response.status());
}

async function run(context) {
  const page = await context.newPage();
  page.on('console', (message) => {
    if (message.type() === 'error') report.consoleErrors.push({ phase, text: message.text() });
  });
  page.on('pageerror', (error) => report.consoleErrors.push({ phase, text: String(error) }));
  page.on('response', (response) => {
    if (response.status() >= 400) {
      report.failedRequests.push({ method: response.request().method(), path: new URL(response.url()).pathname, status: response.status() });
    }
  });
  phase = 'open';
  const refused = page.waitForResponse((response) => response.status() === 403);
  await page.goto(`${options.url}/#/tools`);
  phase = 'login';
  const form = page.locator(`form${tid('login-form')}`);
  const shown = await Promise.race([form.waitFor({ state: 'visible' }).then(() => true), refused.then(() => false)]);
  if (!shown) {
    // The page's script was refused: send what its form would.
    report.login = await page.evaluate(async (token) => {
      const response = await fetch('/ui/login', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ token }),
      });
      const body = await response.json().catch(() => ({}));
      return { shown: false, status: response.status, loggedIn: false, error: body.error || '' };
    }, options.token);
    return;
  }
  await page.locator(tid('login-token')).fill(options.token);
  const loginStatus = statusOf(page, 'POST', '/ui/login');
  await page.locator(tid('login-submit')).click();
  report.login = { shown: true, status: await loginStatus, loggedIn: false, error: '' };
  // Either the page opens, or the form says why not.
  await page.waitForFunction((ids) => {
    const nav = document.querySelector(`nav${ids.nav}`);
    const error = document.querySelector(ids.error);
    return (nav && nav.offsetParent !== null) || (error && error.textContent.trim() !== '');
  }, { nav: tid('nav'), error: tid('login-error') });
  report.login.loggedIn = await page.locator(`nav${tid('nav')}`).isVisible();
  report.login.error = (await page.locator(tid('login-error')).textContent() || '').trim();
  const cookie = (await context.cookies()).find((c) => c.name === 'portico_ui');
  report.cookie = cookie ? { secure: cookie.secure, httpOnly: cookie.httpOnly, sameSite: cookie.sameSite } : null;
  if (!report.login.loggedIn) return;

  phase = 'try';
  await page.locator(`section[data-page="tools"][data-loaded="true"]`).waitFor({ state: 'attached' });
  await page.locator(tid('tool-filter')).fill(options.try);
  await page.locator(`[data-tool="${options.try}"]`).click();
  const detail = page.locator(tid('tool-detail'));
  await detail.waitFor({ state: 'visible' });
  for (const [name, value] of Object.entries(JSON.parse(options.tryArgs))) {
    await detail.locator(`[data-arg="${name}"]`).fill(typeof value === 'string' ? value : JSON.stringify(value));
  }
  const callStatus = statusOf(page, 'POST', `/api/tools/${encodeURIComponent(options.try)}/call`);
  await detail.locator(tid('try-submit')).click();
  const status = await callStatus;
  await page.waitForFunction((selector) => {
    const node = document.querySelector(selector);
    return node && !node.hidden && node.dataset.outcome && node.dataset.outcome !== 'pending';
  }, `${tid('tool-detail')} ${tid('try-result')}`);
  report.tryIt = {
    status,
    outcome: await detail.locator(tid('try-result')).getAttribute('data-outcome'),
    text: (await detail.locator(tid('try-result')).innerText()).trim(),
  };
}

let browser;
try {
  browser = await launchLocked({ timeoutMs: options.timeoutMs });
  const context = await lockedContext(browser, {
    origin,
    timeoutMs: options.timeoutMs,
    // The balancer's certificate is self-signed, made by the test.
    contextOptions: { ignoreHTTPSErrors: true, viewport: { width: 1280, height: 800 } },
    onBlocked: (url) => report.blocked.push(url),
  });
  await run(context);
  phase = 'end';
  report.ok = true;
} catch (error) {
  report.error = `${phase}: ${String(error && error.message ? error.message : error)}`;
} finally {
  phase = 'closing';
  if (browser) await browser.close().catch(() => {});
}
process.stdout.write(`${JSON.stringify(report)}\n`);
process.exit(report.ok ? 0 : 1);
