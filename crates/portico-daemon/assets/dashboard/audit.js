// Audit: the daemon's audit records (newest first), filtered by tool, principal, outcome and time,
// with new records added as they are written, an export of the filtered records as JSON lines, and a
// check of the hash chain that links every record (`portico audit verify`).

import { api, breakable, chip, el, errorText, note, timeCell } from './util.js';

const LIMIT = 200;

export function auditPage(section, context) {
  let loaded = false;
  let applied = {};
  const filters = {};
  const make = (name, label, placeholder) => {
    const input = el('input', { type: 'text', 'data-filter': name, placeholder, 'aria-label': label });
    filters[name] = input;
    return el('label', {}, label, input);
  };
  const apply = el('button', { type: 'submit', class: 'primary', 'data-testid': 'audit-apply' }, 'Apply');
  const exportLink = el('a', { 'data-testid': 'audit-export', href: '/api/audit?format=jsonl', download: 'portico-audit.jsonl' }, 'Export JSON lines');
  const form = el('form', { class: 'filters' },
    make('tool', 'Tool', 'tool name'),
    make('principal', 'Principal', 'client:default'),
    make('outcome', 'Outcome', 'ok, error, denied…'),
    make('since', 'Since', '1h, 2d or RFC 3339'),
    make('until', 'Until', 'RFC 3339'),
    apply, exportLink);
  const problem = el('p', { class: 'error', role: 'alert' });
  const body = el('tbody');
  const table = el('table', {},
    el('thead', {}, el('tr', {}, ['Time', 'Tool', 'Principal', 'Outcome', 'Duration', 'Detail'].map((h) => el('th', {}, h)))),
    body);
  const empty = note('No audit records match.', { hidden: true });
  const verifyButton = el('button', { type: 'button', 'data-testid': 'audit-verify' }, 'Verify the chain');
  const verified = el('span', { 'data-testid': 'audit-verified', role: 'status' });
  verifyButton.addEventListener('click', verify);
  section.append(
    el('h2', {}, 'Audit'),
    el('p', { class: 'intro' }, `Every call through this daemon, newest first (at most ${LIMIT}).`),
    el('p', { class: 'verify' }, verifyButton, ' ', verified),
    form, problem, table, empty);

  async function verify() {
    verifyButton.disabled = true;
    verified.className = 'muted';
    verified.textContent = 'Checking…';
    try {
      const answer = await api('/api/audit/verify', { what: 'The audit chain' });
      const range = answer.first_id != null ? ` (ids ${answer.first_id} to ${answer.last_id})` : '';
      if (answer.ok) {
        verified.className = 'ok';
        verified.textContent = `ok: ${answer.checked} record(s) chained${range}`;
        if (answer.head) verified.title = `head: ${answer.head}`;
      } else {
        verified.className = 'error';
        verified.textContent = `broken: ${answer.message || 'a record does not match its link'}; ${answer.checked} record(s) before it are whole${range}`;
      }
    } catch (error) {
      verified.className = 'error';
      verified.textContent = errorText(error);
    } finally {
      verifyButton.disabled = false;
    }
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    applied = {};
    for (const [name, input] of Object.entries(filters)) {
      if (input.value.trim() !== '') applied[name] = input.value.trim();
    }
    load();
  });

  function query() {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(applied)) params.set(name, value);
    return params;
  }

  function updateExport() {
    const params = query();
    const rest = params.toString();
    exportLink.href = `/api/audit?format=jsonl${rest ? '&' + rest : ''}`;
  }

  function row(record) {
    const outcome = chip(record.outcome);
    const detail = el('td', { class: 'muted', 'data-field': 'detail' }, breakable(record.detail || ''));
    return el('tr', { 'data-audit': String(record.id ?? record.seq ?? '') },
      timeCell(record.time || record.at_ms, { 'data-field': 'time' }),
      el('td', { 'data-field': 'tool' }, el('code', {}, breakable(record.tool || ''))),
      el('td', { 'data-field': 'principal' }, breakable(record.caller || record.principal || '')),
      el('td', { 'data-field': 'outcome' }, outcome),
      el('td', { 'data-field': 'duration', class: 'num' }, `${record.duration_ms ?? 0} ms`),
      detail);
  }

  /// Whether a record (from the event stream) passes the applied filters the page can judge itself.
  function matches(record) {
    if (applied.tool && record.tool !== applied.tool) return false;
    if (applied.principal && record.caller !== applied.principal) return false;
    if (applied.outcome && record.outcome !== applied.outcome) return false;
    return !applied.until;
  }

  async function load() {
    updateExport();
    const params = query();
    params.set('limit', String(LIMIT));
    try {
      const answer = await api(`/api/audit?${params}`, { what: 'The audit log' });
      let records = Array.isArray(answer.records) ? answer.records : [];
      records.sort((a, b) => (b.at_ms ?? 0) - (a.at_ms ?? 0) || (b.id ?? 0) - (a.id ?? 0));
      body.replaceChildren(...records.map(row));
      empty.hidden = records.length > 0;
      problem.textContent = '';
      loaded = true;
    } catch (error) {
      problem.textContent = errorText(error);
    }
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
    event(type, record) {
      if (type !== 'audit' || !loaded || !record || !matches(record)) return;
      const id = String(record.id ?? record.seq ?? '');
      if (id && body.querySelector(`tr[data-audit="${CSS.escape(id)}"]`)) return;
      body.prepend(row(record));
      empty.hidden = true;
      while (body.children.length > LIMIT) body.lastElementChild.remove();
    },
  };
}
