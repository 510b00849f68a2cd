// The approval page's only script, served by the daemon itself (its CSP allows nothing else).
// Everything shown comes from /api/approvals and is put in the page as text (textContent), never as
// HTML: tool names, reasons and arguments are chosen by whoever made the call.
'use strict';

const API = '/api/approvals';

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

async function api(path, options) {
  const response = await fetch(path, {
    credentials: 'same-origin',
    cache: 'no-store',
    ...options,
    headers: { Accept: 'application/json', ...((options && options.headers) || {}) },
  });
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const message = body && typeof body.error === 'string' ? body.error : `HTTP ${response.status}`;
    throw new Error(message);
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
  card.append(el('h3', {}, 'Arguments (exactly as the call will run)'));
  card.append(el('pre', { class: 'arguments' }, JSON.stringify(view.arguments, null, 2)));
  if (!single) {
    card.append(el('p', {}, el('a', { href: `/approvals/${encodeURIComponent(view.id)}` }, 'Open this request')));
  }
  if (view.status === 'pending') {
    card.append(actions(view, card));
  }
  return card;
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

async function main() {
  const main = document.getElementById('app');
  const match = /^\/approvals\/([^/]+)$/.exec(location.pathname);
  try {
    if (match) {
      await showOne(main, decodeURIComponent(match[1]));
    } else {
      await showPending(main);
    }
  } catch (error) {
    main.replaceChildren(el('p', { class: 'error', role: 'alert' }, error.message));
  }
}

main();
