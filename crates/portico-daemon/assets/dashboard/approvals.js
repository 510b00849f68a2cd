// Approvals: the calls a policy holds, each with its exact arguments (the API's argumentsText) and
// Approve / Deny, and the most recent decisions. The same API as the /approvals page, from the
// dashboard's session.

import { api, breakable, chip, el, errorText, note, timeCell, localTime } from './util.js';

export function approvalsPage(section, context) {
  let loaded = false;
  const problem = el('p', { class: 'error', role: 'alert' });
  const pending = el('div', { 'data-testid': 'pending' });
  const decisionsProblem = el('p', { class: 'error', role: 'alert' });
  const decisionsBody = el('tbody');
  const decisions = el('table', { 'data-testid': 'decisions' },
    el('thead', {}, el('tr', {}, ['Decided', 'Tool', 'Caller', 'State', 'Via', 'Request'].map((h) => el('th', {}, h)))),
    decisionsBody);
  section.append(
    el('h2', {}, 'Approvals'),
    el('p', { class: 'intro' }, 'Calls held by an approve policy. Each runs once if approved; the arguments below are exactly what will run.'),
    problem, pending,
    el('h3', {}, 'Recent decisions'), decisionsProblem, decisions);

  function field(list, name, key, value) {
    if (value === undefined || value === null || value === '') return;
    list.append(el('dt', {}, name), el('dd', { 'data-field': key }, value));
  }

  function requestCard(view) {
    const card = el('article', { class: 'card', 'data-approval': view.id });
    const facts = el('dl', { class: 'facts' });
    field(facts, 'Tool', 'tool', view.tool);
    field(facts, 'Caller', 'caller', view.principal);
    field(facts, 'On behalf of', 'on-behalf-of', view.onBehalfOf);
    field(facts, 'Reason', 'reason', view.reason);
    field(facts, 'Policy', 'policy', view.policy);
    field(facts, 'Requested', 'created', localTime(view.createdAt));
    field(facts, 'Expires', 'expires', localTime(view.expiresAt));
    card.append(el('h3', {}, el('code', {}, view.tool), ' ', chip(view.status)), facts);
    if (view.kind === 'definition') {
      card.append(el('p', {}, 'The upstream changed this tool\'s definition; approving makes the new one its pin.'),
        el('pre', { 'data-field': 'arguments' }, typeof view.definitionText === 'string' ? view.definitionText : JSON.stringify(view.definition, null, 2)));
    } else {
      card.append(el('p', { class: 'muted' }, 'Arguments (exactly as the call will run):'),
        // The daemon's text: exact numbers and visible escapes for invisible characters.
        el('pre', { 'data-field': 'arguments' }, typeof view.argumentsText === 'string' ? view.argumentsText : JSON.stringify(view.arguments, null, 2)));
    }
    const reasonLabel = 'Reason for denying (optional)';
    const reason = el('input', { type: 'text', 'data-field': 'deny-reason', 'aria-label': reasonLabel, placeholder: reasonLabel, maxlength: '1000' });
    const approve = el('button', { type: 'button', class: 'primary', 'data-action': 'approve' }, 'Approve');
    const deny = el('button', { type: 'button', class: 'danger', 'data-action': 'deny' }, 'Deny');
    const failed = el('p', { class: 'error', role: 'alert' });
    const answer = async (verb, body) => {
      approve.disabled = true;
      deny.disabled = true;
      failed.textContent = '';
      try {
        await api(`/api/approvals/${encodeURIComponent(view.id)}/${verb}`, { method: 'POST', body, what: `Answering an approval` });
        card.remove();
        await load();
        context.refreshBadge();
      } catch (error) {
        failed.textContent = `Could not ${verb}: ${errorText(error)}`;
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
    card.append(el('div', { class: 'actions' }, approve, deny, reason), failed);
    return card;
  }

  function decisionRow(decision) {
    return el('tr', { 'data-decision': decision.id },
      timeCell(decision.decided_at, { 'data-field': 'decided' }),
      el('td', { 'data-field': 'tool' }, el('code', {}, breakable(decision.tool || ''))),
      el('td', { 'data-field': 'caller' }, breakable(decision.caller || '')),
      el('td', { 'data-field': 'state' }, chip(decision.state)),
      el('td', { 'data-field': 'via' }, decision.via || ''),
      el('td', {}, el('code', { class: 'muted' }, breakable(decision.id))));
  }

  async function loadDecisions() {
    let list;
    try {
      const answer = await api('/api/approvals/decisions?limit=20', { what: 'The decisions list' });
      list = answer.decisions || [];
    } catch (error) {
      decisionsProblem.textContent = errorText(error);
      return;
    }
    decisionsProblem.textContent = '';
    decisionsBody.replaceChildren(...(list.length > 0 ? list.map(decisionRow) : [el('tr', {}, el('td', { colspan: '6', class: 'muted' }, 'No decisions yet.'))]));
  }

  async function load() {
    try {
      const { approvals } = await api('/api/approvals?status=pending', { what: 'The approvals list' });
      const list = Array.isArray(approvals) ? approvals : [];
      context.setPending(list.length);
      // A card someone is typing a reason into stays as it is.
      const keep = new Map();
      for (const card of pending.querySelectorAll('[data-approval]')) {
        if (card.contains(document.activeElement)) keep.set(card.dataset.approval, card);
      }
      pending.replaceChildren(...(list.length > 0
        ? list.map((view) => keep.get(view.id) || requestCard(view))
        : [note('No pending approval requests.', { 'data-testid': 'no-pending' })]));
      problem.textContent = '';
      loaded = true;
    } catch (error) {
      problem.textContent = errorText(error);
    }
    await loadDecisions();
  }

  return {
    show() {
      return loaded ? Promise.resolve() : load();
    },
    poll() {
      load();
    },
    reset() {
      loaded = false;
    },
    event(type) {
      if (type === 'approval' && loaded) load();
    },
  };
}
