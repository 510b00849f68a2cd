// A2A: the tasks this daemon's A2A door holds (state, agent, last change; one task's history and
// artifacts on click) and the external agents it is configured to reach, with their cards.

import { api, breakable, chip, el, errorText, note, timeCell } from './util.js';

export function a2aPage(section, context) {
  let loaded = false;
  let selected = null;
  const tasks = new Map();
  const problem = el('p', { class: 'error', role: 'alert' });
  const body = el('tbody');
  const table = el('table', {},
    el('thead', {}, el('tr', {}, ['Task', 'State', 'Agent', 'Created', 'Updated'].map((h) => el('th', {}, h)))),
    body);
  const empty = note('No A2A tasks yet.', { hidden: true });
  const detail = el('div', { class: 'panel', 'data-testid': 'task-detail', hidden: true });
  const remoteProblem = el('p', { class: 'error', role: 'alert' });
  const remotes = el('div', { 'data-testid': 'remote-agents' });
  section.append(
    el('h2', {}, 'A2A'),
    el('p', { class: 'intro' }, 'Tasks of the A2A door ([a2a]), newest first, and the external agents this daemon reaches.'),
    el('h3', {}, 'Tasks'), problem, table, empty, detail,
    el('h3', {}, 'External agents'), remoteProblem, remotes);

  function row(task) {
    const tr = el('tr', { 'data-task': task.id, class: `clickable${selected === task.id ? ' selected' : ''}`, tabindex: '0' },
      el('td', {}, el('code', {}, breakable(task.id))),
      el('td', { 'data-field': 'state' }, chip(task.state)),
      el('td', { 'data-field': 'agent' }, breakable(task.agent || '')),
      timeCell(task.createdAt, { 'data-field': 'created' }),
      timeCell(task.updatedAt || task.createdAt, { 'data-field': 'updated' }));
    tr.addEventListener('click', () => open(task.id));
    tr.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') open(task.id);
    });
    return tr;
  }

  function render() {
    const sorted = [...tasks.values()].sort((a, b) => String(b.updatedAt || b.createdAt || '').localeCompare(String(a.updatedAt || a.createdAt || '')));
    body.replaceChildren(...sorted.map(row));
    empty.hidden = sorted.length > 0 || problem.textContent !== '';
    table.hidden = sorted.length === 0;
  }

  function partsText(parts) {
    return (Array.isArray(parts) ? parts : []).map((part) => {
      if (typeof part.text === 'string') return part.text;
      if (part.data !== undefined) return JSON.stringify(part.data, null, 2);
      if (part.file || part.raw !== undefined || part.url) {
        const file = part.file || part;
        return `[file ${file.name || file.filename || ''} ${file.mediaType || file.mimeType || ''} ${file.uri || file.url || ''}]`.replace(/\s+/g, ' ');
      }
      return JSON.stringify(part);
    }).join('\n');
  }

  async function open(id) {
    selected = id;
    for (const tr of body.querySelectorAll('tr')) tr.classList.toggle('selected', tr.dataset.task === id);
    detail.hidden = false;
    detail.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
    try {
      const { task } = await api(`/api/a2a/tasks/${encodeURIComponent(id)}`, { what: 'The A2A task' });
      const status = task.status || {};
      const history = (task.history || []).map((m) => el('div', { class: `msg ${m.role === 'ROLE_USER' || m.role === 'user' ? 'user' : 'assistant'}` }, partsText(m.parts)));
      const artifacts = (task.artifacts || []).map((a) => el('div', { class: 'card', 'data-artifact': a.artifactId || a.name || '' },
        el('strong', {}, a.name || a.artifactId || 'artifact'),
        a.description ? el('p', { class: 'muted' }, a.description) : '',
        el('pre', {}, partsText(a.parts))));
      detail.replaceChildren(
        el('h3', {}, `Task ${task.id}`),
        el('dl', { class: 'facts' },
          el('dt', {}, 'State'), el('dd', {}, chip(status.state || task.state)),
          el('dt', {}, 'Context'), el('dd', {}, el('code', {}, task.contextId || '')),
          el('dt', {}, 'Updated'), el('dd', {}, status.timestamp || task.updatedAt || '')),
        status.message ? el('p', {}, partsText(status.message.parts)) : '',
        el('h3', {}, 'History'),
        history.length > 0 ? el('div', { class: 'chat-log', 'data-testid': 'task-history' }, history) : note('No messages.'),
        el('h3', {}, 'Artifacts'),
        el('div', { 'data-testid': 'task-artifacts' }, artifacts.length > 0 ? artifacts : note('No artifacts.')));
    } catch (error) {
      detail.replaceChildren(el('p', { class: 'error' }, errorText(error)));
    }
  }

  function card(remote) {
    const box = el('div', { class: 'card', 'data-remote-agent': remote.name },
      el('h3', {}, remote.name), el('p', { class: 'muted mono' }, remote.url || ''));
    if (remote.error) {
      box.append(el('p', { class: 'error', 'data-field': 'error' }, remote.error));
    } else if (remote.card) {
      const skills = (remote.card.skills || []).map((s) => el('li', {}, el('strong', {}, s.name || s.id || ''), s.description ? ` — ${s.description}` : ''));
      box.append(
        el('p', { 'data-field': 'card-name' }, el('strong', {}, remote.card.name || ''), remote.card.version ? ` ${remote.card.version}` : ''),
        remote.card.description ? el('p', { 'data-field': 'description' }, remote.card.description) : '',
        skills.length > 0 ? el('ul', { 'data-field': 'skills' }, skills) : note('No skills listed.'));
    } else {
      box.append(note('No card fetched yet.'));
    }
    return box;
  }

  async function loadTasks() {
    try {
      const answer = await api('/api/a2a/tasks?limit=100', { what: 'The A2A task list' });
      tasks.clear();
      for (const task of answer.tasks || []) tasks.set(task.id, task);
      problem.textContent = '';
    } catch (error) {
      problem.textContent = errorText(error);
    }
    render();
  }

  async function loadRemotes() {
    try {
      const answer = await api('/api/a2a/agents', { what: 'The external agents list' });
      const shown = (answer.agents || []).map(card);
      remotes.replaceChildren(...(shown.length > 0 ? shown : [note('No external agents are configured.')]));
      remoteProblem.textContent = '';
    } catch (error) {
      remotes.replaceChildren();
      remoteProblem.textContent = errorText(error);
    }
  }

  return {
    show() {
      if (loaded) return Promise.resolve();
      loaded = true;
      return Promise.all([loadTasks(), loadRemotes()]);
    },
    poll() {
      loadTasks();
    },
    reset() {
      loaded = false;
    },
    event(type, data) {
      if (type !== 'task' || !data || typeof data.id !== 'string') return;
      const known = tasks.get(data.id) || { id: data.id, createdAt: new Date().toISOString() };
      tasks.set(data.id, { ...known, agent: data.agent ?? known.agent, state: data.state, updatedAt: new Date().toISOString() });
      if (loaded) render();
      if (selected === data.id && !detail.hidden) open(data.id);
    },
  };
}
