#!/usr/bin/env node
// Drives Portico's dashboard (`portico serve`'s `/`) in headless Chromium (Debian's, driven by
// playwright-core, locked to the daemon's origin by locked_chromium.mjs) for one of two checks,
// selecting elements only by the dashboard contract's data-testid / data-* attributes. Prints ONE
// JSON line on stdout at the end (with --tabs, one `{"event":"tabs-ready"}` line before it, when
// every tab waits for the change the caller makes).
//
// --tabs N: N tabs (pages) of ONE browser context open the dashboard on the Servers page; each
// must load (`data-loaded`). Then every tab waits, without a reload, until CSS's text contains
// TEXT; then the last tab tries tool TRY with JSON TRY_ARGS (a POST that must complete). With
// --then-text, the first tab (the stream's holder) then closes, and once the others are live again
// (`{"event":"leader-closed"}` on stdout) each waits until CSS's text contains THEN_TEXT. Counts the
// /api/events requests the browser made:
//   {"ok", "error"?, "tabs": [{"loaded", "changed", "live", "reloaded"}], "loaded": N,
//    "eventStreams": N, "tryIt": {"outcome", "text", "raw"} | null,
//    "handover": {"changed": <tabs that saw it without a reload>, "live": [...], "newStreams"} | null,
//    "consoleErrors": [...]}
//
// --pages: the Resources page reads resource RESOURCE (its text), fills template TEMPLATE's
// variables from VARS (JSON) and reads it, opens the raw JSON view; the Prompts page gets prompt
// PROMPT with arguments ARGS (JSON) and opens the raw JSON view; saves resources.png and
// prompts.png into --screenshots:
//   {"ok", "error"?, "resources": {"listed": [URIs], "templates": [URI templates], "text",
//    "filledUri", "templateText", "raw"}, "prompts": {"listed": [names], "messages": [{role, text}],
//    "raw"}, "screenshots": {NAME: bytes}, "consoleErrors": [...], "failedRequests": [...],
//    "blocked": [...]}
//
//   node js/dashboard_pages.mjs --url BASE --tabs N --selector CSS --text TEXT --try TOOL --try-args JSON
//        [--then-text THEN_TEXT]
//   node js/dashboard_pages.mjs --url BASE --pages --screenshots DIR --resource URI --template URI_TEMPLATE
//        --vars JSON --prompt NAME --args JSON
//   [--token TOKEN] (logs in through the form, in the first tab) [--timeout-ms N]
//
// Exit 0 when ok, 1 when not, 2 on bad arguments.

import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { launchLocked, lockedContext } from './locked_chromium.mjs';

function usage(message) {
  process.stderr.write(`dashboard_pages: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const options = { timeoutMs: 20000 };
  const flags = new Set(['--pages']);
  const known = new Set(['--url', '--tabs', '--selector', '--text', '--then-text', '--try', '--try-args', '--screenshots', '--resource',
    '--template', '--vars', '--prompt', '--args', '--token', '--timeout-ms']);
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    if (flags.has(flag)) {
      options[flag.slice(2)] = true;
      continue;
    }
    const value = argv[i + 1];
    if (!known.has(flag)) usage(`unknown argument ${flag}`);
    if (value === undefined) usage(`${flag} needs a value`);
    const key = flag.slice(2).replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    options[key] = key === 'timeoutMs' || key === 'tabs' ? Number(value) : value;
    i += 1;
  }
  if (!options.url) usage('--url is required');
  if (!options.tabs === !options.pages) usage('give one of --tabs N and --pages');
  if (options.tabs && !(options.selector && options.text !== undefined && options.try && options.tryArgs)) {
    usage('--tabs needs --selector, --text, --try and --try-args');
  }
  if (options.pages && !(options.screenshots && options.resource && options.template && options.vars && options.prompt && options.args)) {
    usage('--pages needs --screenshots, --resource, --template, --vars, --prompt and --args');
  }
  return options;
}

const options = parseArgs(process.argv.slice(2));
const origin = new URL(options.url).origin;
const tid = (id) => `[data-testid="${id}"]`;
const report = { ok: false, consoleErrors: [], failedRequests: [], requestErrors: [], blocked: [], eventStreams: 0 };
let phase = 'boot';

function watch(page, label) {
  page.on('console', (message) => {
    if (message.type() === 'error') report.consoleErrors.push({ page: label, phase, text: message.text() });
  });
  page.on('pageerror', (error) => report.consoleErrors.push({ page: label, phase, text: String(error) }));
  page.on('response', (response) => {
    if (response.status() >= 400) {
      const url = new URL(response.url());
      report.failedRequests.push({ page: label, phase, method: response.request().method(), url: url.pathname, status: response.status() });
    }
  });
}

async function login(page) {
  await page.locator(`form${tid('login-form')}`).waitFor({ state: 'visible' });
  await page.locator(tid('login-token')).fill(options.token);
  await page.locator(tid('login-submit')).click();
  await page.locator(`nav${tid('nav')}`).waitFor({ state: 'visible' });
}

async function loaded(page, name) {
  await page.locator(`section[data-page="${name}"][data-loaded="true"]`).waitFor({ state: 'attached' });
}

async function tabs(context) {
  phase = 'open';
  const pages = [];
  const first = await context.newPage();
  watch(first, 1);
  pages.push(first);
  await first.goto(`${options.url}#/servers`);
  if (options.token !== undefined) await login(first);
  await loaded(first, 'servers');
  // The others open while the first holds its stream: without sharing, the 7th cannot load.
  for (let i = 2; i <= options.tabs; i += 1) {
    const page = await context.newPage();
    watch(page, i);
    pages.push(page);
    await page.goto(`${options.url}#/servers`, { waitUntil: 'commit' });
  }
  report.tabs = pages.map(() => ({ loaded: false, changed: false }));
  await Promise.all(pages.map(async (page, i) => {
    await loaded(page, 'servers');
    report.tabs[i].loaded = true;
    await page.evaluate(() => {
      window.__pagesMark = 'still here';
    });
  }));
  report.loaded = report.tabs.filter((t) => t.loaded).length;
  // Every tab says it is live (the shared stream is open).
  await Promise.all(pages.map((page) => page.locator(`${tid('live')}[data-state="open"]`).waitFor({ state: 'attached' })));
  phase = 'change';
  process.stdout.write(`${JSON.stringify({ event: 'tabs-ready' })}\n`);
  await Promise.all(pages.map(async (page, i) => {
    await page.waitForFunction(({ selector, text }) => {
      const node = document.querySelector(selector);
      return node && node.textContent.includes(text);
    }, { selector: options.selector, text: options.text }, { timeout: options.timeoutMs * 3 });
    report.tabs[i].changed = true;
    report.tabs[i].reloaded = (await page.evaluate(() => window.__pagesMark)) !== 'still here';
    report.tabs[i].live = await page.locator(tid('live')).getAttribute('data-state');
  }));
  phase = 'try';
  const last = pages[pages.length - 1];
  await last.locator(`nav${tid('nav')} a[data-nav="tools"]`).click();
  await loaded(last, 'tools');
  await last.locator(tid('tool-filter')).fill(options.try);
  await last.locator(`[data-tool="${options.try}"]`).click();
  const detail = last.locator(tid('tool-detail'));
  await detail.waitFor({ state: 'visible' });
  for (const [name, value] of Object.entries(JSON.parse(options.tryArgs))) {
    await detail.locator(`[data-arg="${name}"]`).fill(typeof value === 'string' ? value : JSON.stringify(value));
  }
  await detail.locator(tid('try-submit')).click();
  await last.waitForFunction((selector) => {
    const node = document.querySelector(selector);
    return node && !node.hidden && node.dataset.outcome && node.dataset.outcome !== 'pending';
  }, `${tid('tool-detail')} ${tid('try-result')}`);
  report.tryIt = {
    outcome: await detail.locator(tid('try-result')).getAttribute('data-outcome'),
    text: await detail.locator(tid('try-result')).innerText(),
  };
  // The raw JSON view of the result, opened.
  const raw = detail.locator(`${tid('try-raw')} ${tid('raw-json')}`);
  await raw.locator('summary').click();
  report.tryIt.raw = JSON.parse(await raw.locator('pre').innerText());
  if (options.thenText === undefined) return;
  // The first tab, which holds the stream, closes: another takes it over, and the rest see the
  // next change too.
  phase = 'handover';
  const streamsBefore = report.eventStreams;
  await pages[0].close();
  const rest = pages.slice(1);
  await Promise.all(rest.map((page) => page.locator(`${tid('live')}[data-state="open"]`).waitFor({ state: 'attached' })));
  process.stdout.write(`${JSON.stringify({ event: 'leader-closed' })}\n`);
  report.handover = { changed: 0 };
  await Promise.all(rest.map(async (page) => {
    await page.waitForFunction(({ selector, text }) => {
      const node = document.querySelector(selector);
      return node && node.textContent.includes(text);
    }, { selector: options.selector, text: options.thenText }, { timeout: options.timeoutMs * 3 });
    if ((await page.evaluate(() => window.__pagesMark)) === 'still here') report.handover.changed += 1;
  }));
  report.handover.live = await Promise.all(rest.map((page) => page.locator(tid('live')).getAttribute('data-state')));
  report.handover.newStreams = report.eventStreams - streamsBefore;
}

async function screenshot(page, name) {
  await page.evaluate(() => window.scrollTo(0, 0));
  const path = join(options.screenshots, `${name}.png`);
  await page.screenshot({ path });
  report.screenshots[name] = statSync(path).size;
}

async function openRaw(scope) {
  const raw = scope.locator(tid('raw-json')).first();
  await raw.locator('summary').click();
  return JSON.parse(await raw.locator('pre').innerText());
}

async function contentPages(context) {
  mkdirSync(options.screenshots, { recursive: true });
  report.screenshots = {};
  const page = await context.newPage();
  watch(page, 1);
  phase = 'resources';
  await page.goto(`${options.url}#/resources`);
  if (options.token !== undefined) await login(page);
  await loaded(page, 'resources');
  const section = page.locator('section[data-page="resources"]');
  report.resources = {
    listed: await section.locator('[data-resource]').evaluateAll((rows) => rows.map((r) => r.dataset.resource)),
    templates: await section.locator('[data-template]').evaluateAll((rows) => rows.map((r) => r.dataset.template)),
  };
  const detail = section.locator(tid('resource-detail'));
  const settled = () => page.waitForFunction((selector) => {
    const node = document.querySelector(selector);
    return node && !node.hidden && node.dataset.outcome && node.dataset.outcome !== 'pending';
  }, `section[data-page="resources"] ${tid('resource-result')}`);
  // A resource, read by a click.
  await section.locator(`[data-resource="${options.resource}"]`).click();
  await detail.waitFor({ state: 'visible' });
  await settled();
  report.resources.outcome = await detail.locator(tid('resource-result')).getAttribute('data-outcome');
  report.resources.text = await detail.locator(tid('resource-text')).first().textContent();
  report.resources.inViewport = await detail.evaluate((node) => {
    const box = node.getBoundingClientRect();
    return box.top < window.innerHeight && box.bottom > 0;
  });
  // A template, its variables filled in from the form.
  await section.locator(`[data-template="${options.template}"]`).click();
  const form = detail.locator(tid('template-form'));
  await form.waitFor({ state: 'visible' });
  for (const [name, value] of Object.entries(JSON.parse(options.vars))) {
    await form.locator(`[data-var="${name}"]`).fill(value);
  }
  report.resources.filledUri = await form.locator(tid('template-uri')).innerText();
  await form.locator(tid('template-read')).click();
  await settled();
  report.resources.templateOutcome = await detail.locator(tid('resource-result')).getAttribute('data-outcome');
  // Text content as it is; a blob as the page describes it.
  const texts = detail.locator(tid('resource-text'));
  report.resources.templateText = await texts.count() > 0
    ? await texts.first().textContent()
    : await detail.locator(`${tid('resource-result')} .content-item`).first().innerText();
  report.resources.raw = await openRaw(detail);
  await screenshot(page, 'resources');

  phase = 'prompts';
  await page.locator(`nav${tid('nav')} a[data-nav="prompts"]`).click();
  await loaded(page, 'prompts');
  const prompts = page.locator('section[data-page="prompts"]');
  report.prompts = { listed: await prompts.locator('[data-prompt]').evaluateAll((rows) => rows.map((r) => r.dataset.prompt)) };
  await prompts.locator(`[data-prompt="${options.prompt}"]`).click();
  const promptDetail = prompts.locator(tid('prompt-detail'));
  await promptDetail.waitFor({ state: 'visible' });
  for (const [name, value] of Object.entries(JSON.parse(options.args))) {
    await promptDetail.locator(`[data-arg="${name}"]`).fill(value);
  }
  await promptDetail.locator(tid('prompt-get')).click();
  await page.waitForFunction((selector) => {
    const node = document.querySelector(selector);
    return node && !node.hidden && node.dataset.outcome && node.dataset.outcome !== 'pending';
  }, `section[data-page="prompts"] ${tid('prompt-result')}`);
  const result = promptDetail.locator(tid('prompt-result'));
  report.prompts.outcome = await result.getAttribute('data-outcome');
  report.prompts.messages = await result.locator('[data-role]').evaluateAll((items) => items.map((item) => ({
    role: item.dataset.role,
    text: [...item.querySelectorAll('[data-field="text"]')].map((n) => n.textContent).join('\n'),
  })));
  report.prompts.raw = await openRaw(result);
  await screenshot(page, 'prompts');
}

let browser;
try {
  browser = await launchLocked({ timeoutMs: options.timeoutMs });
  const context = await lockedContext(browser, {
    origin,
    timeoutMs: options.timeoutMs,
    contextOptions: { viewport: { width: 1280, height: 800 } },
    onAllowed: (url) => {
      if (new URL(url).pathname === '/api/events') report.eventStreams += 1;
    },
    onBlocked: (url) => report.blocked.push(url),
  });
  if (options.tabs) await tabs(context);
  else await contentPages(context);
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
