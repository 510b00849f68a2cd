// Servers: every upstream MCP server's state, catalog counts, restarts and last error, with
// restart / disable / enable. Rows change in place on `server` events.

import { api, breakable, chip, el, errorText, note, since } from './util.js';

export function serversPage(section, context) {
  let loaded = false;
  const servers = new Map();
  const body = el('tbody');
  const problem = el('p', { class: 'error', role: 'alert' });
  section.append(
    el('h2', {}, 'Servers'),
    el('p', { class: 'intro' }, 'The upstream MCP servers of this daemon, as they are now.'),
    problem,
  );
  const table = el('table', {},
    el('thead', {}, el('tr', {},
      ['Name', 'State', 'Transport', 'Protocol', 'Catalog', 'Uptime', 'Last error', '']
        .map((h) => el('th', { class: COLUMN_CLASS[h] || '' }, h)))),
    body);
  const empty = note('No upstream MCP servers are configured ([[mcp_servers]] in the config).', { hidden: true });
  section.append(table, empty);

  function restarts(server) {
    if (typeof server.restarts === 'number') return server.restarts;
    return Math.max(0, (server.connects || 0) - 1);
  }

  function row(server) {
    const enabled = server.enabled !== false && server.state !== 'disabled';
    const actions = el('div', { class: 'actions' });
    const result = el('span', { class: 'error', role: 'alert' });
    const act = (action, label, extra) => {
      const button = el('button', { type: 'button', 'data-action': action, class: extra || '' }, label);
      button.addEventListener('click', async () => {
        button.disabled = true;
        result.textContent = '';
        try {
          await api(`/api/servers/${encodeURIComponent(server.name)}/${action}`, { method: 'POST', what: `${label} a server` });
          await load();
        } catch (error) {
          result.textContent = errorText(error);
          button.disabled = false;
        }
      });
      return button;
    };
    if (enabled) actions.append(act('restart', 'Restart'), act('disable', 'Disable', 'danger'));
    else actions.append(act('enable', 'Enable'));
    const lastError = el('td', { 'data-field': 'last-error', class: 'wide' }, breakable(server.last_error || ''));
    if (!server.last_error && server.last_stderr) {
      // While it starts: what the child is saying (a package runner's download lines).
      lastError.append(el('span', { class: 'muted', 'data-field': 'last-stderr' }, breakable(server.last_stderr)));
    }
    if (Array.isArray(server.stderr_tail) && server.stderr_tail.length > 0) {
      lastError.append(el('pre', { 'data-field': 'stderr' }, server.stderr_tail.join('\n')));
    }
    const transport = transportWords(server);
    const up = server.state === 'ready' && server.connected_at ? since(server.connected_at) : '';
    const uptime = el('td', { 'data-field': 'uptime', class: 'tight' }, up || '—');
    if (server.connected_at) uptime.title = `Connected at ${server.connected_at}`;
    const restarted = restarts(server);
    uptime.append(el('div', { class: 'muted', 'data-field': 'restarts', 'data-count': restarted },
      `${restarted} restart${restarted === 1 ? '' : 's'}`));
    const name = el('td', { class: 'name' }, el('strong', {}, breakable(server.name)));
    if (server.server_name) {
      name.append(el('div', { class: 'muted' }, breakable(server.server_name), server.server_version ? ` ${server.server_version}` : ''));
    }
    const resources = (server.resources || 0) + (server.resource_templates || 0);
    const retrying = server.state === 'restarting' && typeof server.failed_attempts === 'number';
    const state = el('td', { 'data-field': 'state' }, chip(retrying ? 'retrying' : server.state));
    if (retrying) {
      // What is true of a server that cannot be reached: how often it failed, when it tries next
      // (counted down here, between the daemon's updates); the cause is under Last error.
      const failed = server.failed_attempts;
      state.append(el('div', { class: 'muted', 'data-field': 'retry' },
        `${failed} failed attempt${failed === 1 ? '' : 's'}, `,
        el('span', { 'data-field': 'next-retry', 'data-at': server.next_retry_at_ms ?? '' }, nextRetry(server))));
    } else if (typeof server.starting_secs === 'number') {
      state.append(el('span', { class: 'muted', 'data-field': 'starting-secs' }, ` ${server.starting_secs}s`));
    }
    // A server waiting for secrets says which, and the command that sets each.
    if (server.state === 'needs_secret' && Array.isArray(server.missing_secrets)) {
      for (const secret of server.missing_secrets) {
        state.append(el('div', { class: 'muted', 'data-field': 'set-secret' }, el('code', {}, `portico secret set ${secret}`)));
      }
    }
    const transportCell = el('td', { 'data-field': 'transport', class: 'tight' }, transport.words);
    if (transport.title) transportCell.title = transport.title;
    return el('tr', { 'data-server': server.name },
      name,
      state,
      transportCell,
      el('td', { 'data-field': 'era', class: 'tight' }, server.protocol_version || '—'),
      el('td', { class: 'tight' },
        counted(server.tools ?? 0, 'tool', 'tools'),
        counted(resources, 'resource', 'resources'),
        counted(server.prompts ?? 0, 'prompt', 'prompts')),
      uptime,
      lastError,
      el('td', { class: 'actions-cell' }, actions, result));
  }

  // A start's elapsed time and last stderr line change without a server event: read them again
  // every 2 s while some server is in a connection attempt.
  let refresh = null;
  function render() {
    const rows = [...servers.values()].sort((a, b) => a.name.localeCompare(b.name)).map(row);
    body.replaceChildren(...rows);
    empty.hidden = rows.length > 0;
    table.hidden = rows.length === 0;
    refreshWhileStarting();
  }
  function refreshWhileStarting() {
    const starting = [...servers.values()].some((s) => typeof s.starting_secs === 'number');
    if (starting && refresh === null) {
      refresh = setTimeout(() => { refresh = null; load(); }, 2000);
    }
    const waiting = [...servers.values()].some((s) => typeof s.next_retry_at_ms === 'number');
    if (waiting && countdown === null) countdown = setInterval(tick, 1000);
    else if (!waiting && countdown !== null) {
      clearInterval(countdown);
      countdown = null;
    }
  }
  // The next retry's "in 8 s", counted down without asking the daemon.
  let countdown = null;
  function tick() {
    for (const span of body.querySelectorAll('[data-field="next-retry"]')) {
      const tr = span.closest('tr[data-server]');
      const server = tr && servers.get(tr.dataset.server);
      if (server) span.textContent = nextRetry(server);
    }
  }

  async function load() {
    try {
      const answer = await api('/api/servers', { what: 'The servers list' });
      servers.clear();
      for (const server of answer.servers || []) servers.set(server.name, server);
      problem.textContent = '';
      loaded = true;
      render();
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
    event(type, data) {
      if (type !== 'server' || !data || typeof data.name !== 'string') return;
      servers.set(data.name, data);
      const existing = body.querySelector(`tr[data-server="${CSS.escape(data.name)}"]`);
      if (existing) existing.replaceWith(row(data));
      else render();
      refreshWhileStarting();
    },
  };
}

/// The columns that keep to their content's width, and the one that takes what is left.
const COLUMN_CLASS = { Name: 'name', Transport: 'tight', Protocol: 'tight', Catalog: 'tight', Uptime: 'tight', 'Last error': 'wide' };

/// `17 tools`, one line of the catalog column.
function counted(count, one, many) {
  return el('div', { 'data-field': many, 'data-count': count }, `${count} ${count === 1 ? one : many}`);
}

/// How a server is reached, in words (`stdio`, `streamable HTTP`, `SSE`), and, when what the URL
/// turned out to speak differs from the config's word, both.
function transportWords(server) {
  const words = { stdio: 'stdio', http: 'streamable HTTP', 'streamable-http': 'streamable HTTP', sse: 'SSE', 'legacy-sse': 'SSE' };
  const configured = words[server.transport] || server.transport || '';
  const spoken = server.transport_detail ? words[server.transport_detail] || server.transport_detail : configured;
  if (spoken === configured) return { words: configured, title: '' };
  return { words: spoken, title: `Configured as ${server.transport}; the URL speaks ${spoken}` };
}

/// "next try in 8 s", or "trying now" once the attempt is under way.
function nextRetry(server) {
  if (typeof server.starting_secs === 'number') return `trying now (${server.starting_secs} s)`;
  const left = Math.ceil(((server.next_retry_at_ms ?? 0) - Date.now()) / 1000);
  return left > 0 ? `next try in ${left} s` : 'trying now';
}
