// The approval page's only script, served by the daemon itself (its CSP allows nothing else).
// Everything shown comes from /api/approvals and is put in the page as text (textContent), never as
// HTML: tool names, reasons and arguments are chosen by whoever made the call.
//
// The door's token comes only in the link's fragment (#token=...), which a browser never sends to any
// server. It is kept in this tab's sessionStorage (per origin, port included: no other local service
// can read it, as it could a cookie) and at once taken out of the address bar and history; the API is
// called with it as a bearer token. Without one, on a door that needs one, the page asks for it.
'use strict';

const API = '/api/approvals';
const TOKEN_KEY = 'portico-approvals-token';

function storedToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

function keepToken(token) {
  try {
    if (token === null) sessionStorage.removeItem(TOKEN_KEY);
    else sessionStorage.setItem(TOKEN_KEY, token);
  } catch {
    // Storage refused (a private mode): the page asks again next time.
  }
}

/// Moves `#token=...` from the URL into sessionStorage; the URL keeps no fragment at all.
function takeTokenFromLink() {
  if (location.hash === '') return;
  const match = /^#(?:.*&)?token=([^&]*)/.exec(location.hash);
  history.replaceState(null, '', location.pathname + location.search);
  if (!match) return;
  let token = match[1];
  try {
    token = decodeURIComponent(token);
  } catch {
    // Not percent-encoded after all: taken as it is.
  }
  token = token.trim();
  if (token !== '') keepToken(token);
}

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    node.setAttribute(name, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

async function api(path, options) {
  const token = storedToken();
  const headers = { Accept: 'application/json', ...((options && options.headers) || {}) };
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(path, {
    // Nothing rides on cookies: the token is the header above.
    credentials: 'omit',
    cache: 'no-store',
    ...options,
    headers,
  });
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const message = body && typeof body.error === 'string' ? body.error : `HTTP ${response.status}`;
    throw new ApiError(message, response.status);
  }
  return body;
}

function when(rfc3339) {
  if (!rfc3339) return '';
  const at = new Date(rfc3339);
  if (Number.isNaN(at.getTime())) return rfc3339;
  const seconds = Math.round((at.getTime() - Date.now()) / 1000);
  const minutes = Math.round(Math.abs(seconds) / 60);
  const span = Math.abs(seconds) < 90 ? `${Math.abs(seconds)} s` : `${minutes} min`;
  return `${rfc3339} (${seconds >= 0 ? 'in ' + span : span + ' ago'})`;
}

function field(list, name, value) {
  if (value === undefined || value === null || value === '') return;
  list.append(el('dt', {}, name), el('dd', {}, value));
}

/// One request: what was asked, with its exact arguments, and the answer buttons while it is pending.
function requestCard(view, single) {
  const card = el('section', { class: 'request', 'data-id': view.id });
  if (single) card.dataset.single = 'true';
  card.append(el('h2', {}, single ? `Approval request ${view.id}` : view.tool));
  const status = el('p', { class: `status status-${view.status}`, role: 'status' }, `Status: ${view.status}`);
  card.append(status);
  const facts = el('dl');
  field(facts, 'Tool', view.tool);
  field(facts, 'Caller', view.principal);
  field(facts, 'On behalf of', view.onBehalfOf);
  field(facts, 'Reason', view.reason);
  field(facts, 'Policy', view.policy);
  field(facts, 'Requested', when(view.createdAt));
  field(facts, 'Expires', when(view.expiresAt));
  field(facts, 'Decided', when(view.decidedAt));
  field(facts, 'Decided by', view.decidedBy && `${view.decidedBy}${view.decidedVia ? ' via ' + view.decidedVia : ''}`);
  field(facts, 'Deny reason', view.denyReason);
  field(facts, 'Consumed', when(view.consumedAt));
  card.append(facts);
  if (view.kind === 'definition') {
    card.append(...definitionChange(view));
  } else {
    card.append(el('h3', {}, 'Arguments (exactly as the call will run)'));
    // The daemon's text of the exact arguments: re-serialising `view.arguments` here would round
    // integers beyond 2^53 and show bidi and zero-width characters as nothing.
    const argumentsText = typeof view.argumentsText === 'string' ? view.argumentsText : JSON.stringify(view.arguments, null, 2);
    card.append(el('pre', { class: 'arguments' }, argumentsText));
  }
  if (!single) {
    card.append(el('p', {}, el('a', { href: `/approvals/${encodeURIComponent(view.id)}` }, 'Open this request')));
  }
  if (view.status === 'pending') {
    card.append(actions(view, card));
  }
  return card;
}

/// A changed upstream tool definition ([policy] pin_tools): each changed field before and after,
/// then the whole new definition. Approving it makes it the tool's pin.
function definitionChange(view) {
  const parts = [el('h3', {}, 'Changed definition (approve to offer the tool with it)')];
  for (const change of Array.isArray(view.diff) ? view.diff : []) {
    // The daemon's text of each value: exact, with invisible characters (tag characters,
    // zero-width, bidi) escaped, where a description could hide instructions.
    const show = (text, value) => (typeof text === 'string' ? text : value === undefined ? '(absent)' : JSON.stringify(value, null, 2));
    parts.push(
      el('h4', {}, `Field: ${change.field}`),
      el('p', {}, 'Pinned:'),
      el('pre', { class: 'before' }, show(change.beforeText, change.before)),
      el('p', {}, 'Now:'),
      el('pre', { class: 'after' }, show(change.afterText, change.after)),
    );
  }
  parts.push(el('h3', {}, 'New definition'));
  parts.push(el('pre', { class: 'definition' }, show(view.definitionText, view.definition)));
  return parts;
}

function actions(view, card) {
  const reasonLabel = `Reason for denying (optional)`;
  const reason = el('input', { type: 'text', name: 'deny-reason', 'aria-label': reasonLabel, placeholder: reasonLabel, maxlength: '1000' });
  const approve = el('button', { type: 'button' }, 'Approve');
  const deny = el('button', { type: 'button' }, 'Deny');
  const problem = el('p', { class: 'error', role: 'alert' });
  const answer = async (verb, body) => {
    approve.disabled = true;
    deny.disabled = true;
    problem.textContent = '';
    try {
      const decided = await api(`${API}/${encodeURIComponent(view.id)}/${verb}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
      card.replaceWith(requestCard(decided, card.dataset.single === 'true'));
    } catch (error) {
      problem.textContent = `Could not ${verb}: ${error.message}`;
      approve.disabled = false;
      deny.disabled = false;
    }
  };
  approve.addEventListener('click', () => answer('approve', { via: 'web' }));
  deny.addEventListener('click', () => {
    const body = { via: 'web' };
    if (reason.value.trim() !== '') body.reason = reason.value.trim();
    answer('deny', body);
  });
  const row = el('div', { class: 'actions' }, approve, deny, reason);
  return el('div', {}, row, problem);
}

async function showOne(main, id) {
  const view = await api(`${API}/${encodeURIComponent(id)}`);
  main.replaceChildren(requestCard(view, true));
}

async function showPending(main) {
  const { approvals } = await api(`${API}?status=pending`);
  if (!Array.isArray(approvals) || approvals.length === 0) {
    main.replaceChildren(el('p', {}, 'No pending approval requests.'));
    return;
  }
  main.replaceChildren(
    el('p', {}, `${approvals.length} pending request${approvals.length === 1 ? '' : 's'}, newest first.`),
    ...approvals.map((view) => requestCard(view, false)),
  );
}

/// The door needs a token this tab does not have (or has a wrong one): ask for it.
function tokenForm(main, refused) {
  const input = el('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', 'aria-label': 'Portico token' });
  const form = el('form', { class: 'token' }, el('label', { for: 'token' }, 'Token '), input, ' ', el('button', { type: 'submit' }, 'Open'));
  form.addEventListener('submit', (event) => {
    // Handled here: the CSP lets no form be submitted anywhere.
    event.preventDefault();
    const token = input.value.trim();
    if (token === '') return;
    keepToken(token);
    show(main);
  });
  main.replaceChildren(
    el('p', { class: 'error', role: 'alert' }, refused
      ? 'The daemon refused this token. Enter the right one.'
      : 'This daemon needs its token to show approvals.'),
    el('p', {}, 'Open the approval link with #token=<token> at its end (after #, the token never leaves this browser), or enter [server] token\'s value (in daemon.json) or your [[server.clients]] token here. It is kept only in this tab. Or answer from a terminal: portico approvals approve ID.'),
    form,
  );
  input.focus();
}

async function show(main) {
  const match = /^\/approvals\/([^/]+)$/.exec(location.pathname);
  try {
    if (match) {
      await showOne(main, decodeURIComponent(match[1]));
    } else {
      await showPending(main);
    }
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      const refused = storedToken() !== null;
      keepToken(null);
      tokenForm(main, refused);
      return;
    }
    main.replaceChildren(el('p', { class: 'error', role: 'alert' }, error.message));
  }
}

takeTokenFromLink();
show(document.getElementById('app'));
