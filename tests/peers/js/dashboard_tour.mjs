#!/usr/bin/env node
// Tours Portico's dashboard (`portico serve`'s `/`) in headless Chromium (Debian's, driven by
// playwright-core): logs in when asked to, visits every page, saves a full-page PNG of each, and
// performs the scripted actions given (saving a PNG after each: approvals-decided, tools-try,
// agents-chat, a2a-task, PAGE-live; servers-dark, the servers page in the dark scheme; login, the login
// form, when logging in), selecting elements only by the dashboard contract's
// data-testid / data-* attributes. Prints ONE JSON line on stdout at the end (and, with --live,
// one `{"event":"live-ready"}` line before it, when the page waits for the change the caller makes):
//
//   {"ok", "error"?, "status": <first navigation's HTTP status>,
//    "login": {"formShown", "wrongError"?, "loggedIn", "whoami", "logoutShown"} | null,
//    "pages": {NAME: {"consoleErrors": [...], "screenshot": <path>, "loaded": bool, "text"}},
//    "consoleErrors": [{"page", "text"}], "failedRequests": [{"page", "method", "url", "status"}],
//    "requestErrors": [{"page", "method", "url", "error"}], "blocked": [<URLs outside the origin>],
//    "cookies": [{name, httpOnly, sameSite, path}],
//    "approve": {"id", "tool", "gone", "decisions": [{id, state}]} | null,
//    "tryIt": {"schema", "args": [[name, tag, type]], "json": <the JSON view after typing into the
//              inputs>, "outcome", "text"} | null,
//    "chat": {"text", "state", "chunks": <text events the answer was built from>,
//             "partials": <distinct growing texts seen>, "tools": [...], "user": [...],
//             "conversations": N, "reloaded": <the conversation loaded back into the log>} | null,
//    "live": {"before", "after", "changed", "reloaded": <whether the page was reloaded>,
//             "state": <live indicator data-state at the end>} | null,
//    "liveState": <[data-testid=live] data-state at the end>, "navigations": N}
//
//   node js/dashboard_tour.mjs --url BASE --screenshots DIR
//        [--token TOKEN [--wrong-token WRONG]]
//        [--approve TOOL]                      approve the pending request of TOOL
//        [--try TOOL --try-args JSON]          try TOOL, typing JSON's values into its argument
//                                              inputs, and read the result
//        [--chat AGENT --message TEXT]         send TEXT, wait for the streamed reply
//        [--task ID]                           open A2A task ID's history and artifacts
//        [--live PAGE --live-selector CSS --live-text TEXT]
//                                              on PAGE, wait (no reload) until CSS's text contains TEXT
//        [--timeout-ms N]
//
// Same safety as browser_click.mjs: Chromium may reach only BASE's origin (127.0.0.1 in the tests):
// every other request is aborted and listed in "blocked"; background networking is off and the host
// resolver maps every name but 127.0.0.1 to nothing. The binary: $PORTICO_TEST_CHROMIUM, else
// /usr/bin/chromium. Exit 0 when ok, 1 when not, 2 on bad arguments.

import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { launchLocked, lockedContext } from './locked_chromium.mjs';

const PAGES = ['servers', 'tools', 'agents', 'a2a', 'approvals', 'audit'];

function usage(message) {
  process.stderr.write(`dashboard_tour: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const options = { timeoutMs: 20000 };
  const known = new Set(['--url', '--screenshots', '--token', '--wrong-token', '--approve', '--try', '--try-args',
    '--chat', '--message', '--task', '--live', '--live-selector', '--live-text', '--timeout-ms']);
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (!known.has(flag)) usage(`unknown argument ${flag}`);
    if (value === undefined) usage(`${flag} needs a value`);
    const key = flag.slice(2).replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    options[key] = key === 'timeoutMs' ? Number(value) : value;
  }
  if (!options.url) usage('--url is required');
  if (!options.screenshots) usage('--screenshots is required');
  if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0) usage('--timeout-ms wants a positive number');
  if (options.try && options.tryArgs === undefined) usage('--try needs --try-args');
  if (options.chat && options.message === undefined) usage('--chat needs --message');
  if (options.live && (!options.liveSelector || options.liveText === undefined)) usage('--live needs --live-selector and --live-text');
  if (options.live && !PAGES.includes(options.live)) usage(`--live wants one of ${PAGES.join(', ')}`);
  return options;
}

const options = parseArgs(process.argv.slice(2));
const origin = new URL(options.url).origin;
mkdirSync(options.screenshots, { recursive: true });

const report = {
  ok: false, status: null, login: null, pages: {}, consoleErrors: [], failedRequests: [], requestErrors: [],
  blocked: [], cookies: [], approve: null, tryIt: null, chat: null, task: null, live: null, liveState: null, navigations: 0,
};
let phase = 'boot';

const tid = (id) => `[data-testid="${id}"]`;

async function visit(page, name) {
  phase = name;
  await page.locator(`nav${tid('nav')} a[data-nav="${name}"]`).click();
  const section = page.locator(`section[data-page="${name}"]`);
  await section.waitFor({ state: 'visible' });
  await page.locator(`section[data-page="${name}"][data-loaded="true"]`).waitFor({ state: 'attached' });
  // Only the active page is visible.
  const visible = await page.locator('section[data-page]:visible').count();
  if (visible !== 1) throw new Error(`${visible} pages visible on ${name}`);
}

/// Saves the page as NAME.png and notes what SECTION (by default the page of that name) shows.
async function screenshot(page, name, section = name) {
  const path = join(options.screenshots, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  const entry = report.pages[name] || (report.pages[name] = { consoleErrors: [] });
  entry.screenshot = path;
  entry.bytes = statSync(path).size;
  entry.loaded = true;
  const root = section === 'login' ? tid('login') : `section[data-page="${section}"]`;
  entry.text = await page.locator(root).innerText();
}

async function login(page) {
  const form = page.locator(`form${tid('login-form')}`);
  await form.waitFor({ state: 'visible' });
  report.login = { formShown: true };
  await screenshot(page, 'login', 'login');
  if (options.wrongToken !== undefined) {
    await page.locator(tid('login-token')).fill(options.wrongToken);
    await page.locator(tid('login-submit')).click();
    const error = page.locator(tid('login-error'));
    await page.waitForFunction((selector) => document.querySelector(selector)?.textContent.trim() !== '', tid('login-error'));
    report.login.wrongError = await error.innerText();
  }
  await page.locator(tid('login-token')).fill(options.token);
  await page.locator(tid('login-submit')).click();
  await page.locator(`nav${tid('nav')}`).waitFor({ state: 'visible' });
  await form.waitFor({ state: 'hidden' });
  report.login.loggedIn = true;
  report.login.whoami = await page.locator(tid('whoami')).innerText();
  report.login.logoutShown = await page.locator(tid('logout')).isVisible();
}

/// Presses the Audit page's "Verify the chain" and returns what it then says.
async function verifyChain(page) {
  phase = 'audit-verify';
  await page.locator(tid('audit-verify')).click();
  await page.waitForFunction((selector) => {
    const text = document.querySelector(selector)?.textContent.trim() || '';
    return text !== '' && !text.startsWith('Checking');
  }, tid('audit-verified'));
  return (await page.locator(tid('audit-verified')).innerText()).trim();
}

async function task(page) {
  await visit(page, 'a2a');
  const row = page.locator(`tr[data-task="${options.task}"]`);
  await row.waitFor({ state: 'visible' });
  report.task = { state: (await row.locator('[data-field="state"]').innerText()).trim() };
  await row.click();
  const detail = page.locator(tid('task-detail'));
  await detail.locator(tid('task-history')).waitFor({ state: 'visible' });
  report.task.history = await detail.locator(`${tid('task-history')} .msg`).allInnerTexts();
  report.task.artifacts = await detail.locator('[data-artifact]').allInnerTexts();
  await screenshot(page, 'a2a-task', 'a2a');
}

async function approve(page) {
  await visit(page, 'approvals');
  const card = page.locator('[data-approval]').filter({
    has: page.locator(`[data-field="tool"]`, { hasText: new RegExp(`^${options.approve.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`) }),
  }).first();
  await card.waitFor({ state: 'visible' });
  const id = await card.getAttribute('data-approval');
  report.approve = { id, tool: options.approve, arguments: await card.locator('pre[data-field="arguments"]').innerText() };
  await card.locator('button[data-action="approve"]').click();
  await page.locator(`[data-approval="${id}"]`).waitFor({ state: 'detached' });
  report.approve.gone = true;
  const decision = page.locator(`${tid('decisions')} [data-decision="${id}"]`);
  await decision.waitFor({ state: 'visible' });
  report.approve.decisions = await page.locator(`${tid('decisions')} [data-decision]`).evaluateAll((rows) => rows.map((row) => ({
    id: row.getAttribute('data-decision'),
    state: row.querySelector('[data-field="state"]')?.textContent.trim(),
  })));
  report.approve.badge = await page.locator(tid('approvals-badge')).evaluate((b) => (b.hidden ? '' : b.textContent));
  await screenshot(page, 'approvals-decided', 'approvals');
}

async function tryIt(page) {
  await visit(page, 'tools');
  await page.locator(tid('tool-filter')).fill(options.try);
  await page.locator(`[data-tool="${options.try}"]`).click();
  const detail = page.locator(tid('tool-detail'));
  await detail.waitFor({ state: 'visible' });
  report.tryIt = {
    schema: await detail.locator(tid('tool-schema')).innerText(),
    args: await detail.locator('[data-arg]').evaluateAll((inputs) => inputs.map((i) => [i.getAttribute('data-arg'), i.tagName.toLowerCase(), i.type || ''])),
  };
  // Typed into the per-argument inputs; the JSON view follows them.
  for (const [name, value] of Object.entries(JSON.parse(options.tryArgs))) {
    const input = detail.locator(`[data-arg="${name}"]`);
    if (typeof value === 'boolean') await input.setChecked(value);
    else await input.fill(typeof value === 'string' ? value : JSON.stringify(value));
  }
  report.tryIt.json = await detail.locator(tid('try-args')).inputValue();
  await detail.locator(tid('try-submit')).click();
  const result = detail.locator(tid('try-result'));
  await page.waitForFunction((selector) => {
    const node = document.querySelector(selector);
    return node && !node.hidden && node.dataset.outcome && node.dataset.outcome !== 'pending';
  }, `${tid('tool-detail')} ${tid('try-result')}`);
  report.tryIt.outcome = await result.getAttribute('data-outcome');
  report.tryIt.text = await result.innerText();
  await screenshot(page, 'tools-try', 'tools');
}

async function chat(page) {
  await visit(page, 'agents');
  await page.locator(`[data-agent="${options.chat}"]`).click();
  await page.locator(tid('agent-config')).waitFor({ state: 'visible' });
  // Every text the streaming answer shows on its way, seen by the page itself.
  await page.evaluate(() => {
    window.__tourPartials = [];
    const log = document.querySelector('[data-testid="chat-log"]');
    new MutationObserver(() => {
      const last = [...log.querySelectorAll('.msg.assistant')].pop();
      const text = last ? last.textContent : '';
      const seen = window.__tourPartials;
      if (text !== '' && seen[seen.length - 1] !== text) seen.push(text);
    }).observe(log, { childList: true, subtree: true, characterData: true });
  });
  await page.locator(`textarea${tid('chat-input')}`).fill(options.message);
  await page.locator(`button${tid('chat-send')}`).click();
  await page.waitForFunction(() => {
    const answers = document.querySelectorAll('[data-testid="chat-log"] .msg[data-state]');
    const last = answers[answers.length - 1];
    return last && (last.dataset.state === 'done' || last.dataset.state === 'error');
  });
  const last = page.locator(`${tid('chat-log')} .msg[data-state]`).last();
  report.chat = {
    state: await last.getAttribute('data-state'),
    text: await last.innerText(),
    chunks: Number(await last.getAttribute('data-chunks') || 0),
    partials: await page.evaluate(() => window.__tourPartials),
    tools: await page.locator(`${tid('chat-log')} .msg.tool`).allInnerTexts(),
    user: await page.locator(`${tid('chat-log')} .msg.user`).allInnerTexts(),
  };
  // The conversation is listed; loaded back, the log shows it again.
  const row = page.locator(`${tid('conversations')} [data-conversation]`).first();
  await row.waitFor({ state: 'visible' });
  report.chat.conversations = await page.locator(`${tid('conversations')} [data-conversation]`).count();
  await screenshot(page, 'agents-chat', 'agents');
  await page.locator(tid('chat-new')).click();
  await row.click();
  await page.locator(`${tid('chat-log')} .msg.assistant`).first().waitFor({ state: 'visible' });
  report.chat.reloaded = await page.locator(`${tid('chat-log')} .msg`).allInnerTexts();
}

async function live(page) {
  await visit(page, options.live);
  const target = page.locator(options.liveSelector).first();
  const read = () => page.evaluate((selector) => {
    const node = document.querySelector(selector);
    return node ? node.textContent : null;
  }, options.liveSelector);
  report.live = { before: await read() };
  // A mark a reload would lose.
  await page.evaluate(() => {
    window.__tourMark = 'still here';
  });
  const navigations = report.navigations;
  process.stdout.write(`${JSON.stringify({ event: 'live-ready' })}\n`);
  await page.waitForFunction(({ selector, text }) => {
    const node = document.querySelector(selector);
    return node && node.textContent.includes(text);
  }, { selector: options.liveSelector, text: options.liveText }, { timeout: options.timeoutMs * 3 });
  report.live.after = await target.textContent();
  report.live.changed = true;
  report.live.reloaded = navigations !== report.navigations
    || (await page.evaluate(() => window.__tourMark)) !== 'still here';
  report.live.state = await page.locator(tid('live')).getAttribute('data-state');
  await screenshot(page, `${options.live}-live`, options.live);
}

let browser;
try {
  browser = await launchLocked({ timeoutMs: options.timeoutMs });
  const context = await lockedContext(browser, {
    origin, timeoutMs: options.timeoutMs, contextOptions: { viewport: { width: 1280, height: 800 } }, onBlocked: (url) => report.blocked.push(url),
  });
  const page = await context.newPage();
  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    report.consoleErrors.push({ page: phase, text: message.text() });
    (report.pages[phase] || (report.pages[phase] = { consoleErrors: [] })).consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => {
    report.consoleErrors.push({ page: phase, text: String(error) });
    (report.pages[phase] || (report.pages[phase] = { consoleErrors: [] })).consoleErrors.push(String(error));
  });
  page.on('response', (response) => {
    if (response.status() >= 400) {
      const url = new URL(response.url());
      report.failedRequests.push({ page: phase, method: response.request().method(), url: url.pathname + url.search, status: response.status() });
    }
  });
  page.on('requestfailed', (request) => {
    const url = new URL(request.url());
    report.requestErrors.push({ page: phase, method: request.method(), url: url.pathname + url.search, error: request.failure()?.errorText ?? '' });
  });
  page.on('framenavigated', (frame) => {
    if (frame === page.mainFrame()) report.navigations += 1;
  });
  const response = await page.goto(options.url, { waitUntil: 'load' });
  report.status = response ? response.status() : null;
  if (options.token !== undefined) {
    phase = 'login';
    await login(page);
  }
  await page.locator(`nav${tid('nav')}`).waitFor({ state: 'visible' });
  for (const name of PAGES) {
    await visit(page, name);
    await screenshot(page, name);
    if (name === 'audit') report.auditVerify = await verifyChain(page);
  }
  // The same page in the dark scheme (prefers-color-scheme), for people to look at.
  await page.emulateMedia({ colorScheme: 'dark' });
  await visit(page, 'servers');
  await screenshot(page, 'servers-dark', 'servers');
  await page.emulateMedia({ colorScheme: 'light' });
  if (options.approve) await approve(page);
  if (options.try) await tryIt(page);
  if (options.chat) await chat(page);
  if (options.task) await task(page);
  if (options.live) await live(page);
  phase = 'end';
  report.liveState = await page.locator(tid('live')).getAttribute('data-state');
  report.cookies = (await context.cookies()).map(({ name, httpOnly, sameSite, path }) => ({ name, httpOnly, sameSite, path }));
  report.ok = true;
} catch (error) {
  report.error = `${phase}: ${String(error && error.message ? error.message : error)}`;
} finally {
  // What the closing browser aborts (the event stream) is not the page's doing.
  phase = 'closing';
  const requestErrors = report.requestErrors.slice();
  if (browser) await browser.close().catch(() => {});
  report.requestErrors = requestErrors;
}
process.stdout.write(`${JSON.stringify(report)}\n`);
process.exit(report.ok ? 0 : 1);
