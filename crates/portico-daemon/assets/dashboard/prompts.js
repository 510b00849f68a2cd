// Prompts: the prompt templates the upstream servers offer, as the doors serve them to MCP clients
// (`mcp_SERVER_NAME`); one got with its arguments filled in from a form, its messages shown by role
// and content, and as raw JSON.

import { api, el, errorText, note } from './util.js';
import { breakable, contentBlock } from './content.js';
import { rawJson } from './raw.js';

export function promptsPage(section) {
  let loaded = false;
  let prompts = [];
  let selected = null;
  const problem = el('p', { class: 'error', role: 'alert' });
  const rows = el('tbody', { 'data-testid': 'prompts-list' });
  const count = el('span', { class: 'muted' });
  const detail = el('div', { class: 'panel', 'data-testid': 'prompt-detail', hidden: true });
  section.append(
    el('h2', {}, 'Prompts'),
    el('p', { class: 'intro' }, 'The prompts the servers offer MCP clients. Click one to fill in its arguments and get its messages.'),
    problem,
    el('div', { class: 'browse' },
      el('div', {},
        el('h3', {}, 'Prompts ', count),
        el('table', { class: 'content-table' },
          el('thead', {}, el('tr', {}, ['Name', 'Arguments', 'Description'].map((h) => el('th', {}, h)))),
          rows)),
      detail));

  function argumentsOf(prompt) {
    return Array.isArray(prompt.arguments) ? prompt.arguments.filter((a) => a && typeof a.name === 'string') : [];
  }

  function render() {
    rows.replaceChildren(...prompts.map((prompt) => {
      const tr = el('tr', { 'data-prompt': prompt.name, class: `clickable${selected === prompt.name ? ' selected' : ''}`, tabindex: '0' },
        el('td', { class: 'name' }, el('code', {}, breakable(prompt.name)), prompt.server ? el('div', { class: 'muted' }, breakable(prompt.server)) : ''),
        el('td', { class: 'name mono' }, argumentsOf(prompt).map((a) => `${a.name}${a.required ? '*' : ''}`).join(', ')),
        el('td', { class: 'muted' }, prompt.title && prompt.description ? `${prompt.title}: ${prompt.description}` : prompt.description || prompt.title || ''));
      tr.addEventListener('click', () => pick(prompt));
      tr.addEventListener('keydown', (event) => {
        if (event.key === 'Enter') pick(prompt);
      });
      return tr;
    }));
    if (prompts.length === 0) rows.append(el('tr', {}, el('td', { colspan: '3' }, note('No prompts.'))));
    count.textContent = `(${prompts.length})`;
  }

  function pick(prompt) {
    selected = prompt.name;
    render();
    const form = el('form', { class: 'try', 'data-testid': 'prompt-form' });
    const inputs = new Map();
    for (const argument of argumentsOf(prompt)) {
      const id = `prompt-${prompt.name}-${argument.name}`.replace(/[^A-Za-z0-9_-]/g, '_');
      const input = el('input', { type: 'text', id, 'data-arg': argument.name, required: argument.required === true });
      inputs.set(argument.name, input);
      form.append(el('div', { class: 'field' },
        el('label', { for: id, title: argument.description || '' }, `${argument.name}${argument.required ? ' *' : ''}`),
        el('div', {}, input, argument.description ? el('div', { class: 'muted' }, argument.description) : '')));
    }
    if (inputs.size === 0) form.append(note('This prompt takes no arguments.'));
    const submit = el('button', { type: 'submit', class: 'primary', 'data-testid': 'prompt-get' }, 'Get prompt');
    const result = el('div', { 'data-testid': 'prompt-result', hidden: true });
    form.append(el('div', { class: 'actions' }, submit));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const args = {};
      for (const [name, input] of inputs) if (input.value !== '') args[name] = input.value;
      submit.disabled = true;
      result.hidden = false;
      result.dataset.outcome = 'pending';
      result.replaceChildren(note('Getting the prompt…'));
      try {
        const answer = await api(`/api/prompts/${encodeURIComponent(prompt.name)}/get`, { method: 'POST', body: { arguments: args }, what: 'Getting a prompt' });
        const got = answer.result || {};
        const messages = Array.isArray(got.messages) ? got.messages : [];
        result.dataset.outcome = 'ok';
        result.replaceChildren(
          got.description ? el('p', { class: 'description' }, got.description) : '',
          el('p', { class: 'muted' }, `${messages.length} message${messages.length === 1 ? '' : 's'}${typeof answer.duration_ms === 'number' ? ` in ${answer.duration_ms} ms` : ''}.`),
          ...messages.map((message) => el('div', { class: `content-item ${message.role || ''}`, 'data-role': message.role || '' },
            el('div', { class: 'meta' }, message.role || 'no role'),
            (Array.isArray(message.content) ? message.content : [message.content]).map(contentBlock))),
          rawJson(got));
      } catch (error) {
        result.dataset.outcome = 'error';
        result.replaceChildren(el('p', { class: 'error', 'data-field': 'error' }, errorText(error)),
          error.body ? rawJson(error.body) : '');
      } finally {
        submit.disabled = false;
      }
    });
    detail.replaceChildren(
      el('h3', {}, prompt.title ? `${prompt.title} (${prompt.name})` : prompt.name),
      prompt.description ? el('p', { class: 'description' }, prompt.description) : '',
      form, result);
    detail.hidden = false;
    detail.scrollIntoView({ block: 'nearest' });
    const first = form.querySelector('input');
    if (first) first.focus();
  }

  async function load() {
    try {
      const listed = await api('/api/prompts', { what: 'The prompts list' });
      prompts = Array.isArray(listed.prompts) ? listed.prompts : [];
      prompts.sort((a, b) => a.name.localeCompare(b.name));
      problem.textContent = listed.exposed === false ? 'This daemon serves no prompts ([expose] prompts = false).' : '';
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
    event(type) {
      if (type === 'server' && loaded) load();
    },
  };
}
