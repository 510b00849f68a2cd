// The dashboard's entry module: the session (login form or not), the hash router between the pages,
// the pending-approvals badge and the live event stream (/api/events, one for all tabs: live.js)
// that keeps every page current without a reload. The daemon serves it with a CSP that allows only
// its own files and API.
//
// Authentication: on a door that needs a token the page posts it once to /ui/login, which answers
// with an HttpOnly, SameSite=Strict session cookie and, in its body, the session's page key, which
// the page keeps in this origin's local storage and sends as X-Portico-Page-Key with every request
// (browsers send the cookie to every port of the host; the key stays with this one). The token
// itself is never stored by the page. On an open loopback door (no token at all) there is no login.

import { api, el, errorText, onUnauthorized, pageKey } from './util.js';
import { liveStream } from './live.js';
import { serversPage } from './servers.js';
import { toolsPage } from './tools.js';
import { resourcesPage } from './resources.js';
import { promptsPage } from './prompts.js';
import { agentsPage } from './agents.js';
import { a2aPage } from './a2a.js';
import { approvalsPage } from './approvals.js';
import { auditPage } from './audit.js';

const PAGES = ['servers', 'tools', 'resources', 'prompts', 'agents', 'a2a', 'approvals', 'audit'];
const DEFAULT_PAGE = 'servers';
/// How often the pages re-read what they show while the event stream is down.
const POLL_MS = 10000;

const $ = (selector) => document.querySelector(selector);

const state = {
  session: null,
  pages: {},
  current: null,
  /// What the address names within the current page (`#/tools/NAME`: `NAME`, still encoded).
  sub: null,
  pollTimer: null,
  started: false,
};

const badge = $('[data-testid="approvals-badge"]');
const live = $('[data-testid="live"]');

const context = {
  /// Sets the pending-approvals badge.
  setPending(count) {
    badge.textContent = String(count);
    badge.hidden = count === 0;
    badge.title = `${count} pending approval request${count === 1 ? '' : 's'}`;
  },
  async refreshBadge() {
    try {
      const { approvals } = await api('/api/approvals?status=pending', { what: 'The approvals list' });
      context.setPending(Array.isArray(approvals) ? approvals.length : 0);
    } catch {
      // The approvals page says what failed; the badge just stays as it was.
    }
  },
  session() {
    return state.session;
  },
};

function setLive(open) {
  live.dataset.state = open ? 'open' : 'closed';
  live.title = open ? 'Live: changes appear as they happen' : 'Not live: the page re-reads every 10 s';
}

/// The page the address names, and what within it: `#/tools/NAME` is the tools page with NAME open.
function pageFromHash() {
  const match = /^#\/([a-z0-9]+)(?:\/(.*))?$/.exec(location.hash);
  if (!match || !PAGES.includes(match[1])) return { name: DEFAULT_PAGE, sub: null };
  return { name: match[1], sub: match[2] || null };
}

function show({ name, sub }) {
  for (const page of PAGES) {
    const section = $(`section[data-page="${page}"]`);
    section.hidden = page !== name;
    const link = $(`nav a[data-nav="${page}"]`);
    link.classList.toggle('active', page === name);
    if (page === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  state.current = name;
  state.sub = sub;
  document.title = `Portico: ${$(`nav a[data-nav="${name}"]`).firstChild.textContent.trim()}`;
  showPage(name);
}

/// Shows a page's data, marking its section `data-loaded` once the first read is done (whether it
/// worked or not: a failure is shown in the page).
function showPage(name) {
  const section = $(`section[data-page="${name}"]`);
  Promise.resolve(state.pages[name].show(name === state.current ? state.sub : null))
    .catch(() => {})
    .finally(() => {
      section.dataset.loaded = 'true';
    });
}

function createPages() {
  const makers = { servers: serversPage, tools: toolsPage, resources: resourcesPage, prompts: promptsPage, agents: agentsPage, a2a: a2aPage, approvals: approvalsPage, audit: auditPage };
  for (const name of PAGES) {
    state.pages[name] = makers[name]($(`section[data-page="${name}"]`), context);
  }
}

/// Every page re-reads what it shows (after a `resync`, or the stream coming back).
function resyncAll() {
  for (const name of PAGES) state.pages[name].reset();
  showPage(state.current);
  context.refreshBadge();
}

function dispatch(type, data) {
  for (const name of PAGES) {
    const page = state.pages[name];
    if (page.event) page.event(type, data);
  }
  if (type === 'approval') context.refreshBadge();
}

function startPolling() {
  if (state.pollTimer !== null) return;
  state.pollTimer = setInterval(() => {
    if (document.hidden) return;
    state.pages[state.current].poll?.();
    context.refreshBadge();
  }, POLL_MS);
}

function stopPolling() {
  if (state.pollTimer !== null) clearInterval(state.pollTimer);
  state.pollTimer = null;
}

/// The live stream, shared with this origin's other tabs (live.js): while it is open the page
/// follows its events; while it is not, the page polls.
const stream = liveStream({
  onOpen(reconnected) {
    setLive(true);
    stopPolling();
    // Whatever happened while no stream was open is read again.
    if (reconnected) resyncAll();
  },
  onEvent(type, data) {
    if (type === 'resync') resyncAll();
    else dispatch(type, data);
  },
  onClosed() {
    setLive(false);
    startPolling();
  },
});

function openEvents() {
  stream.start();
}

function closeEvents() {
  stream.stop();
  stopPolling();
  setLive(false);
}

function showWho(session) {
  const who = $('[data-testid="whoami"]');
  const logout = $('[data-testid="logout"]');
  if (!session) {
    who.textContent = '';
    logout.hidden = true;
    return;
  }
  who.textContent = session.auth === 'open'
    ? `${session.principal || 'local'} (open loopback door)`
    : `${session.principal || 'signed in'}`;
  who.title = `Authenticated by ${session.auth}`;
  logout.hidden = session.auth !== 'cookie';
}

function start(session) {
  state.session = session;
  showWho(session);
  $('[data-testid="login"]').hidden = true;
  $('nav[data-testid="nav"]').hidden = false;
  live.hidden = false;
  state.started = true;
  show(pageFromHash());
  context.refreshBadge();
  openEvents();
}

function stop() {
  state.started = false;
  closeEvents();
  for (const name of PAGES) {
    state.pages[name].reset();
    const section = $(`section[data-page="${name}"]`);
    section.hidden = true;
    delete section.dataset.loaded;
  }
}

function showLogin(message) {
  stop();
  state.session = null;
  showWho(null);
  $('nav[data-testid="nav"]').hidden = true;
  live.hidden = true;
  $('[data-testid="login"]').hidden = false;
  $('[data-testid="login-error"]').textContent = message || '';
  $('[data-testid="login-token"]').focus();
}

/// Who this browser is to the daemon (`/ui/session`), or null when it must log in.
async function readSession() {
  try {
    return await api('/ui/session', { what: 'The session' });
  } catch (error) {
    if (error.status === 401) return null;
    throw error;
  }
}

async function boot() {
  createPages();
  onUnauthorized(() => {
    if (state.started) showLogin('The session ended. Log in again.');
  });
  window.addEventListener('hashchange', () => {
    if (state.started) show(pageFromHash());
  });
  $('[data-testid="logout"]').addEventListener('click', async () => {
    try {
      await api('/ui/logout', { method: 'POST', what: 'Logging out' });
    } catch {
      // Logged out as far as this page goes either way.
    }
    pageKey.clear();
    showLogin('Logged out.');
  });
  $('[data-testid="login-form"]').addEventListener('submit', async (event) => {
    // Handled here: the CSP lets no form be submitted anywhere.
    event.preventDefault();
    const input = $('[data-testid="login-token"]');
    const submit = $('[data-testid="login-submit"]');
    const problem = $('[data-testid="login-error"]');
    const token = input.value.trim();
    if (token === '') return;
    submit.disabled = true;
    problem.textContent = '';
    try {
      const answer = await api('/ui/login', { method: 'POST', body: { token }, what: 'Logging in from the browser' });
      input.value = '';
      pageKey.set(answer.pageKey);
      const session = await readSession();
      if (session) start(session);
      else problem.textContent = 'Logged in, but the daemon did not keep the session (are cookies blocked for this address?).';
    } catch (error) {
      input.value = '';
      problem.textContent = error.status === 401 ? `Refused: ${errorText(error)}` : errorText(error);
    } finally {
      submit.disabled = false;
    }
  });
  try {
    const session = await readSession();
    if (session) start(session);
    else showLogin('');
  } catch (error) {
    const fatal = $('[data-testid="fatal"]');
    fatal.textContent = `Could not reach the daemon: ${errorText(error)}`;
    fatal.hidden = false;
  }
}

boot().catch((error) => {
  const fatal = $('[data-testid="fatal"]');
  fatal.append(el('span', {}, `The dashboard failed to start: ${errorText(error)}`));
  fatal.hidden = false;
});
