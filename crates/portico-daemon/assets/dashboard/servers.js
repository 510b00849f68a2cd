// Servers: every upstream MCP server's state, catalog counts, restarts and last error, with
// restart / disable / enable. Rows change in place on `server` events.

import { api, chip, el, errorText, note, since } from './util.js';

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
      ['Name', 'State', 'Transport', 'Protocol', 'Tools', 'Resources', 'Prompts', 'Restarts', 'Uptime', 'Last error', ''].map((h) => el('th', {}, h)))),
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
    const lastError = el('td', { 'data-field': 'last-error' }, server.last_error || '');
    if (!server.last_error && server.last_stderr) {
      // While it starts: what the child is saying (a package runner's download lines).
      lastError.append(el('span', { class: 'muted', 'data-field': 'last-stderr' }, server.last_stderr));
    }
    if (Array.isArray(server.stderr_tail) && server.stderr_tail.length > 0) {
      lastError.append(el('pre', { 'data-field': 'stderr' }, server.stderr_tail.join('\n')));
    }
    const transport = server.transport_detail ? `${server.transport} (${server.transport_detail})` : server.transport;
    const up = server.state === 'ready' && server.connected_at ? since(server.connected_at) : '';
    const uptime = el('td', { 'data-field': 'uptime' }, up || '—');
    if (server.connected_at) uptime.title = `Connected at ${server.connected_at}`;
    const name = el('td', {}, el('strong', {}, server.name));
    if (server.server_name) {
      name.append(el('div', { class: 'muted' }, `${server.server_name}${server.server_version ? ' ' + server.server_version : ''}`));
    }
    const resources = (server.resources || 0) + (server.resource_templates || 0);
    const state = el('td', { 'data-field': 'state' }, chip(server.state));
    if (typeof server.starting_secs === 'number') {
      state.append(el('span', { class: 'muted', 'data-field': 'starting-secs' }, ` ${server.starting_secs}s`));
    }
    // A server waiting for secrets says which, and the command that sets each.
    if (server.state === 'needs_secret' && Array.isArray(server.missing_secrets)) {
      for (const secret of server.missing_secrets) {
        state.append(el('div', { class: 'muted', 'data-field': 'set-secret' }, el('code', {}, `portico secret set ${secret}`)));
      }
    }
    return el('tr', { 'data-server': server.name },
      name,
      state,
      el('td', { 'data-field': 'transport' }, transport || ''),
      el('td', { 'data-field': 'era' }, server.protocol_version || '—'),
      el('td', { 'data-field': 'tools', class: 'num' }, server.tools ?? 0),
      el('td', { 'data-field': 'resources', class: 'num' }, resources),
      el('td', { 'data-field': 'prompts', class: 'num' }, server.prompts ?? 0),
      el('td', { 'data-field': 'restarts', class: 'num' }, restarts(server)),
      uptime,
      lastError,
      el('td', {}, actions, result));
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
