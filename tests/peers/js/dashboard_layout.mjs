#!/usr/bin/env node
// Measures the layout of Portico's dashboard in headless Chromium (Debian's, driven by playwright-
// core, locked to the dashboard's origin like dashboard_tour.mjs), on an open door (no login):
//
// - Words kept whole: each page is loaded at every --viewport, and for every visible th and td the
//   page's own line boxes are read (a Range over each character: a character whose box starts
//   below the previous one's starts a new line). A new line may start only after a space or after
//   `_ - . /`, or where the text moves to another block (a chip, a div); in a th never. Text in
//   <pre> (logs) is not measured. The tools page is measured again with --tool's detail open.
//   Inputs whose placeholder does not fit are listed too ("cutPlaceholders"), and tables wider than
//   their container ("overflowing").
// - The tool detail in view: after a click on the tools list's first and last rows (at each viewport, and at
//   1000x800 where the detail goes below the list), after loading `#/tools/NAME` in a fresh page,
//   and after reloading that page: the detail's bounding box against the viewport.
// - With --screenshots DIR: one PNG per page at 1280x800 (the viewport, not the full page), the
//   tools page with --tool's detail open, the agents page with --agent's chat open.
//
// Prints ONE JSON line on stdout:
//
//   {"ok", "error"?, "viewports": {"WxH": {PAGE: {"cells": N, "breaks": [{cell, tag, at}],
//                                          "cutPlaceholders": [{placeholder, needed, available}],
//                                          "overflowing": [{table: <its first header>, by: px}]}}},
//    "clicks": {"WxH": {"first"|"last": {"tool", "hash", "reloaded", "box", "viewport",
//                                         "intersects", "heading", "focused"}}},
//    "direct": {"hash", "box", "viewport", "intersects", "heading"}, "reloaded": {same},
//    "texts": {PAGE: innerText at 1280x800}, "screenshots": {NAME: {path, bytes}},
//    "consoleErrors": [...], "blocked": [...]}
//
//   node js/dashboard_layout.mjs --url BASE --tool NAME [--agent NAME] [--screenshots DIR]
//        [--viewports 1280x800,1920x1080] [--timeout-ms N]
//
// Exit 0 when it ran (whatever it measured), 1 when it could not, 2 on bad arguments.

import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { launchLocked, lockedContext } from './locked_chromium.mjs';

const PAGES = ['servers', 'tools', 'resources', 'prompts', 'agents', 'a2a', 'approvals', 'audit'];

function usage(message) {
  process.stderr.write(`dashboard_layout: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const options = { timeoutMs: 20000, viewports: '1280x800,1920x1080' };
  const known = new Set(['--url', '--tool', '--agent', '--screenshots', '--viewports', '--timeout-ms']);
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (!known.has(flag)) usage(`unknown argument ${flag}`);
    if (value === undefined) usage(`${flag} needs a value`);
    const key = flag.slice(2).replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    options[key] = key === 'timeoutMs' ? Number(value) : value;
  }
  if (!options.url) usage('--url is required');
  if (!options.tool) usage('--tool is required');
  if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0) usage('--timeout-ms wants a positive number');
  options.sizes = options.viewports.split(',').map((size) => {
    const match = /^(\d+)x(\d+)$/.exec(size.trim());
    if (!match) usage(`--viewports wants WxH,WxH, got ${size}`);
    return { width: Number(match[1]), height: Number(match[2]) };
  });
  return options;
}

const options = parseArgs(process.argv.slice(2));
const base = new URL(options.url);
const origin = base.origin;
if (options.screenshots) mkdirSync(options.screenshots, { recursive: true });

const report = {
  ok: false, viewports: {}, clicks: {}, direct: null, reloaded: null, texts: {}, screenshots: {}, consoleErrors: [], blocked: [],
};
let phase = 'boot';
const tid = (id) => `[data-testid="${id}"]`;
const sizeName = ({ width, height }) => `${width}x${height}`;

/// Runs in the page: every line break inside a word of a visible th/td of the shown page.
function measureBreaks() {
  const ALLOWED_AFTER = new Set(['_', '-', '.', '/']);
  const block = (node) => {
    let element = node.parentElement;
    while (element && getComputedStyle(element).display === 'inline') element = element.parentElement;
    return element;
  };
  const breaks = [];
  let cells = 0;
  const range = document.createRange();
  for (const cell of document.querySelectorAll('section[data-page]:not([hidden]) :is(th, td)')) {
    if (cell.getClientRects().length === 0) continue;
    cells += 1;
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT, {
      acceptNode: (node) => (node.parentElement.closest('pre, textarea') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
    });
    let previous = null;
    let space = false;
    let seen = '';
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const container = block(node);
      const text = node.nodeValue;
      for (let i = 0; i < text.length; i += 1) {
        const ch = text[i];
        seen += ch;
        if (/\s/.test(ch)) {
          space = true;
          continue;
        }
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rect = range.getClientRects()[0];
        if (!rect || (rect.width === 0 && rect.height === 0)) continue;
        if (previous && rect.top > previous.top + previous.height / 2) {
          const sameBlock = previous.container === container;
          const allowed = cell.tagName === 'TH'
            ? !sameBlock
            : !sameBlock || space || ALLOWED_AFTER.has(previous.ch);
          if (!allowed) {
            breaks.push({ tag: cell.tagName.toLowerCase(), cell: cell.textContent.trim().slice(0, 120), at: `${seen.slice(-25, -1)}⏎${ch}` });
          }
        }
        previous = { ch, top: rect.top, height: rect.height, container };
        space = false;
      }
    }
  }
  // Placeholders cut off: the text, in the input's font, wider than the input's content box.
  const context = document.createElement('canvas').getContext('2d');
  const cutPlaceholders = [];
  for (const input of document.querySelectorAll('section[data-page]:not([hidden]) input[placeholder]')) {
    if (input.getClientRects().length === 0 || input.value !== '') continue;
    const style = getComputedStyle(input);
    context.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const needed = Math.ceil(context.measureText(input.placeholder).width);
    const available = Math.floor(input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight));
    if (needed > available) cutPlaceholders.push({ placeholder: input.placeholder, needed, available });
  }
  // Tables wider than their page (words kept whole must not push a column out of sight).
  const overflowing = [];
  for (const table of document.querySelectorAll('section[data-page]:not([hidden]) table')) {
    if (table.getClientRects().length === 0) continue;
    const by = Math.round(table.getBoundingClientRect().right - table.parentElement.getBoundingClientRect().right);
    // Up to 2 px is the table's own 1 px borders, which a full-width table whose columns exactly
    // fill its container adds on either side (collapsed borders): nothing is pushed out of sight.
    if (by > 2) overflowing.push({ table: table.querySelector('th')?.textContent ?? '', by });
  }
  return { cells, breaks, cutPlaceholders, overflowing };
}

/// Runs in the page: the tool detail's box against the viewport.
function detailInView() {
  const detail = document.querySelector('[data-testid="tool-detail"]');
  const r = detail.getBoundingClientRect();
  const viewport = { width: window.innerWidth, height: window.innerHeight };
  return {
    hash: location.hash,
    box: { top: Math.round(r.top), bottom: Math.round(r.bottom), left: Math.round(r.left), right: Math.round(r.right) },
    viewport,
    intersects: !detail.hidden && r.top < viewport.height && r.bottom > 0 && r.left < viewport.width && r.right > 0,
    heading: detail.querySelector('h3')?.textContent ?? null,
    focused: document.activeElement === detail.querySelector('h3'),
  };
}

async function visit(page, name) {
  phase = name;
  await page.locator(`nav${tid('nav')} a[data-nav="${name}"]`).click();
  await page.locator(`section[data-page="${name}"][data-loaded="true"]`).waitFor({ state: 'visible' });
}

async function snap(page, name) {
  if (!options.screenshots) return;
  const path = join(options.screenshots, `${name}.png`);
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path });
  report.screenshots[name] = { path, bytes: statSync(path).size };
}

/// Opens --tool from the filtered list (the tools page is showing).
async function openTool(page) {
  await page.locator(tid('tool-filter')).fill(options.tool);
  await page.locator(`[data-tool="${options.tool}"]`).click();
  await page.locator(tid('tool-detail')).waitFor({ state: 'visible' });
}

/// Clicks the first, then the last row of the whole tools list (the page scrolled to each): the
/// detail must be where the click was.
async function clickRows(page, size) {
  phase = `click ${sizeName(size)}`;
  await page.setViewportSize(size);
  await page.goto(new URL('/#/tools', base).href, { waitUntil: 'load' });
  await page.locator('section[data-page="tools"][data-loaded="true"]').waitFor({ state: 'visible' });
  await page.locator('section[data-page="tools"] tbody tr').first().waitFor({ state: 'visible' });
  await page.evaluate(() => { window.__layoutMark = 'still here'; });
  const clicks = {};
  for (const which of ['first', 'last']) {
    const rows = page.locator('section[data-page="tools"] tbody tr');
    const row = which === 'first' ? rows.first() : rows.last();
    const tool = await row.getAttribute('data-tool');
    await row.click();
    await page.locator(`${tid('tool-detail')} h3`).first().filter({ hasText: tool }).waitFor({ state: 'visible' });
    const seen = await page.evaluate(detailInView);
    seen.tool = tool;
    seen.reloaded = (await page.evaluate(() => window.__layoutMark)) !== 'still here';
    clicks[which] = seen;
  }
  report.clicks[sizeName(size)] = clicks;
}

/// Loads `#/tools/NAME` in a fresh page, then reloads it: the detail is open and in view each time.
async function direct(context) {
  phase = 'direct';
  const page = await context.newPage();
  await page.setViewportSize({ width: 1280, height: 800 });
  // A detail that never opens is measured as it is (hidden: not in view), not a failure to run.
  const opened = () => page.locator(tid('tool-detail')).waitFor({ state: 'visible', timeout: 5000 }).catch(() => {});
  await page.goto(new URL(`/#/tools/${encodeURIComponent(options.tool)}`, base).href, { waitUntil: 'load' });
  await page.locator('section[data-page="tools"][data-loaded="true"]').waitFor({ state: 'visible' });
  await opened();
  report.direct = await page.evaluate(detailInView);
  phase = 'reload';
  await page.reload({ waitUntil: 'load' });
  await page.locator('section[data-page="tools"][data-loaded="true"]').waitFor({ state: 'visible' });
  await opened();
  report.reloaded = await page.evaluate(detailInView);
  await page.close();
}

let browser;
try {
  browser = await launchLocked({ timeoutMs: options.timeoutMs });
  const context = await lockedContext(browser, {
    origin, timeoutMs: options.timeoutMs, contextOptions: { viewport: options.sizes[0] }, onBlocked: (url) => report.blocked.push(url),
  });
  const page = await context.newPage();
  const onError = (text) => report.consoleErrors.push({ page: phase, text });
  page.on('console', (message) => {
    if (message.type() === 'error') onError(message.text());
  });
  page.on('pageerror', (error) => onError(String(error)));
  await page.goto(options.url, { waitUntil: 'load' });
  await page.locator(`nav${tid('nav')}`).waitFor({ state: 'visible' });
  for (const size of options.sizes) {
    await page.setViewportSize(size);
    const measured = {};
    for (const name of PAGES) {
      await visit(page, name);
      measured[name] = await page.evaluate(measureBreaks);
      if (size.width === 1280 && size.height === 800) {
        report.texts[name] = await page.locator(`section[data-page="${name}"]`).innerText();
        // Resources and prompts are pictured by dashboard_pages.mjs, with a read and a prompt open.
        if (!['tools', 'agents', 'resources', 'prompts'].includes(name)) await snap(page, name);
      }
      if (name === 'tools') {
        await openTool(page);
        if (size.width === 1280 && size.height === 800) await snap(page, 'tools');
        // The whole list beside the open detail.
        await page.locator(tid('tool-filter')).fill('');
        measured['tools-open'] = await page.evaluate(measureBreaks);
      }
      if (name === 'agents' && size.width === 1280 && size.height === 800) {
        if (options.agent) {
          await page.locator(`[data-agent="${options.agent}"]`).click();
          await page.locator(tid('agent-config')).waitFor({ state: 'visible' });
        }
        await snap(page, 'agents');
      }
    }
    report.viewports[sizeName(size)] = measured;
  }
  for (const size of [...options.sizes, { width: 1000, height: 800 }]) await clickRows(page, size);
  await direct(context);
  phase = 'end';
  report.ok = true;
} catch (error) {
  report.error = `${phase}: ${String(error && error.message ? error.message : error)}`;
} finally {
  if (browser) await browser.close().catch(() => {});
}
process.stdout.write(`${JSON.stringify(report)}\n`);
process.exit(report.ok ? 0 : 1);
