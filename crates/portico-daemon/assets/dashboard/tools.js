// Tools: the catalog this daemon serves (built-in, upstream, agents), filterable, each with where
// it comes from and its policy mark; a tool's schema shown readably, and a form to try it. The open
// tool has its own address, `#/tools/NAME`: its detail shows beside the list on a wide window (and
// stays in view while the list scrolls), below it on a narrow one, scrolled to.

import { api, breakable, chip, el, errorText, note } from './util.js';
import { rawJson } from './raw.js';

const HOST_POLICY = 'portico/hostPolicy';

export function toolsPage(section, context) {
  let loaded = false;
  let tools = [];
  let selected = null;
  /// The tool the address names but the list has not loaded yet.
  let wanted = null;
  const filter = el('input', { type: 'search', 'data-testid': 'tool-filter', placeholder: 'Filter by name, description or source', 'aria-label': 'Filter tools' });
  const count = el('span', { class: 'muted' });
  const problem = el('p', { class: 'error', role: 'alert' });
  const body = el('tbody');
  const table = el('table', {},
    el('thead', {}, el('tr', {}, ['Name', 'Source', 'Policy', 'Description'].map((h) => el('th', { class: h === 'Name' ? 'name' : h === 'Description' ? 'wide' : '' }, h)))),
    body);
  const detail = el('div', { class: 'panel tool-detail', 'data-testid': 'tool-detail', hidden: true });
  const split = el('div', { class: 'tools-split' }, el('div', { class: 'tools-list' }, table), detail);
  section.append(
    el('h2', {}, 'Tools'),
    el('p', { class: 'intro' }, 'What this daemon serves to its clients. Click a tool for its schema and to try it.'),
    el('div', { class: 'toolbar' }, filter, count),
    problem, split);
  filter.addEventListener('input', render);

  function mark(tool) {
    const policy = tool._meta && tool._meta[HOST_POLICY];
    if (!policy || typeof policy.action !== 'string') return '';
    const words = { approve: 'needs approval', deny: 'denied', host: 'asks the host' };
    const shown = chip(`${words[policy.action] || policy.action}${policy.conditional ? ' (sometimes)' : ''}`);
    shown.classList.add(policy.action === 'deny' ? 'bad' : 'warn');
    if (policy.reason) shown.title = policy.reason;
    return shown;
  }

  function source(tool) {
    return tool.server ? `${tool.source} ${tool.server}` : tool.source || '';
  }

  function render() {
    const words = filter.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const shown = tools.filter((tool) => {
      const haystack = `${tool.name} ${tool.description || ''} ${source(tool)}`.toLowerCase();
      return words.every((word) => haystack.includes(word));
    });
    body.replaceChildren(...shown.map((tool) => {
      const tr = el('tr', { 'data-tool': tool.name, class: `clickable${selected === tool.name ? ' selected' : ''}`, tabindex: '0' },
        el('td', { class: 'name' }, el('code', {}, breakable(tool.name))),
        el('td', { 'data-field': 'source' }, breakable(source(tool))),
        el('td', { 'data-field': 'marks' }, mark(tool)),
        el('td', { class: 'muted wide' }, breakable(firstLine(tool.description))));
      tr.addEventListener('click', () => open(tool.name));
      tr.addEventListener('keydown', (event) => {
        if (event.key === 'Enter') open(tool.name);
      });
      return tr;
    }));
    count.textContent = `${shown.length} of ${tools.length} tools`;
  }

  /// Opens a tool from the list: its address becomes `#/tools/NAME` (a history entry, no reload).
  function open(name) {
    const hash = `#/tools/${encodeURIComponent(name)}`;
    if (location.hash !== hash) history.pushState(null, '', hash);
    select(name);
  }

  function select(name) {
    selected = name;
    const tool = tools.find((t) => t.name === name);
    for (const tr of body.querySelectorAll('tr')) tr.classList.toggle('selected', tr.dataset.tool === name);
    split.classList.toggle('open', Boolean(tool));
    if (!tool) {
      detail.hidden = true;
      return;
    }
    detail.replaceChildren(...toolDetail(tool));
    detail.hidden = false;
    // Where the click was: beside the list it is in view already (sticky); below it, scrolled to.
    const box = detail.getBoundingClientRect();
    if (box.top >= window.innerHeight || box.bottom <= 0) detail.scrollIntoView({ block: 'start' });
    detail.querySelector('h3')?.focus({ preventScroll: true });
  }

  /// Shows what the address names: `#/tools/NAME` that tool's detail, `#/tools` none.
  function follow(sub) {
    const name = sub ? safeDecode(sub) : null;
    if (!loaded) {
      wanted = name;
      return;
    }
    if (name === null) {
      if (selected !== null) select(null);
    } else if (name !== selected || detail.hidden) {
      select(name);
      if (!tools.some((t) => t.name === name)) problem.textContent = `No tool named ${name} in this daemon's catalog.`;
    }
  }

  async function load() {
    try {
      const answer = await api('/api/tools', { what: 'The tools list' });
      tools = Array.isArray(answer.tools) ? answer.tools : [];
      tools.sort((a, b) => a.name.localeCompare(b.name));
      problem.textContent = answer.exposed === false ? 'This daemon serves no tools ([expose] tools = false).' : '';
      loaded = true;
      // The open detail (and a form being filled in, a call waiting) stays as it is.
      render();
      if (wanted !== null) {
        const name = wanted;
        wanted = null;
        follow(encodeURIComponent(name));
      }
    } catch (error) {
      problem.textContent = errorText(error);
    }
  }

  return {
    show(sub) {
      if (loaded) {
        follow(sub);
        return Promise.resolve();
      }
      wanted = sub ? safeDecode(sub) : null;
      return load();
    },
    poll() {
      load();
    },
    reset() {
      loaded = false;
    },
    event(type) {
      // A server's catalog changed: the list follows (the open detail stays as it is).
      if (type === 'server' && loaded) load();
    },
  };
}

function safeDecode(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function firstLine(text) {
  const line = String(text || '').split('\n')[0];
  return line.length > 160 ? `${line.slice(0, 160)}…` : line;
}

function typeOf(schema) {
  if (!schema || typeof schema !== 'object') return 'any';
  if (Array.isArray(schema.type)) return schema.type.join(' | ');
  if (typeof schema.type === 'string') {
    if (schema.type === 'array' && schema.items && schema.items.type) return `array of ${typeOf(schema.items)}`;
    return schema.type;
  }
  if (Array.isArray(schema.enum)) return 'enum';
  if (schema.anyOf || schema.oneOf) return (schema.anyOf || schema.oneOf).map(typeOf).join(' | ');
  return 'any';
}

function mainType(schema) {
  const type = schema && schema.type;
  if (Array.isArray(type)) return type.find((t) => t !== 'null') || 'string';
  return type || 'string';
}

/// The detail of one tool: description, schema one property a line, and the try-it form.
function toolDetail(tool) {
  const schema = tool.inputSchema && typeof tool.inputSchema === 'object' ? tool.inputSchema : {};
  const properties = schema.properties && typeof schema.properties === 'object' ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const names = Object.keys(properties);
  const lines = names.map((name) => {
    const prop = properties[name] || {};
    const extra = Array.isArray(prop.enum) ? ` one of ${prop.enum.map((v) => JSON.stringify(v)).join(', ')}` : '';
    return el('div', { class: 'prop', 'data-prop': name },
      el('span', { class: 'prop-name mono' }, name), ': ',
      el('span', { class: 'mono' }, typeOf(prop) + extra), ' ',
      required.has(name) ? el('span', { class: 'req' }, 'required') : el('span', { class: 'muted' }, 'optional'),
      prop.description ? el('span', {}, ` — ${prop.description}`) : '');
  });
  const schemaView = el('div', { class: 'schema', 'data-testid': 'tool-schema' },
    lines.length > 0 ? lines : note('This tool takes no arguments.'));
  const parts = [
    el('h3', { tabindex: '-1' }, breakable(tool.title ? `${tool.title} (${tool.name})` : tool.name)),
    el('p', { class: 'muted' }, el('a', { href: `#/tools/${encodeURIComponent(tool.name)}`, 'data-testid': 'tool-link' }, 'Link to this tool')),
    tool.description ? el('p', { class: 'description' }, tool.description) : '',
    el('h3', {}, 'Arguments'),
    schemaView,
  ];
  if (tool.outputSchema) {
    parts.push(el('details', {}, el('summary', {}, 'Output schema'), el('pre', {}, JSON.stringify(tool.outputSchema, null, 2))));
  }
  parts.push(el('h3', {}, 'Try it'), tryForm(tool, properties, required));
  return parts;
}

function tryForm(tool, properties, required) {
  const form = el('form', { class: 'try', 'data-testid': 'try-form' });
  const inputs = new Map();
  const raw = el('textarea', { 'data-testid': 'try-args', 'aria-label': 'Arguments as JSON', rows: '4', spellcheck: 'false' });
  let rawEdited = false;
  const problem = el('p', { class: 'error', role: 'alert' });

  for (const [name, prop] of Object.entries(properties)) {
    const type = mainType(prop || {});
    const id = `try-${tool.name}-${name}`.replace(/[^A-Za-z0-9_-]/g, '_');
    let input;
    if (type === 'boolean') {
      input = el('input', { type: 'checkbox', id, 'data-arg': name });
    } else if (type === 'number' || type === 'integer') {
      input = el('input', { type: 'number', id, 'data-arg': name, step: type === 'integer' ? '1' : 'any' });
    } else if (type === 'object' || type === 'array') {
      input = el('textarea', { id, 'data-arg': name, rows: '3', spellcheck: 'false', placeholder: type === 'array' ? '[ ]' : '{ }' });
    } else {
      input = el('input', { type: 'text', id, 'data-arg': name });
    }
    if (prop && prop.default !== undefined) {
      if (type === 'boolean') input.checked = prop.default === true;
      else input.value = typeof prop.default === 'string' ? prop.default : JSON.stringify(prop.default);
    }
    inputs.set(name, { input, type });
    input.addEventListener('input', () => {
      rawEdited = false;
      syncRaw();
    });
    input.addEventListener('change', () => {
      rawEdited = false;
      syncRaw();
    });
    form.append(el('div', { class: 'field' },
      el('label', { for: id }, `${name}${required.has(name) ? ' *' : ''}`), input));
  }

  /// The arguments the fields say, or an error naming the field that is not valid.
  function fromFields() {
    const args = {};
    for (const [name, { input, type }] of inputs) {
      if (type === 'boolean') {
        if (input.checked || required.has(name)) args[name] = input.checked;
        continue;
      }
      const text = input.value;
      if (text === '') continue;
      if (type === 'number' || type === 'integer') {
        const number = Number(text);
        if (!Number.isFinite(number)) throw new Error(`${name}: not a number`);
        args[name] = number;
      } else if (type === 'object' || type === 'array') {
        try {
          args[name] = JSON.parse(text);
        } catch (error) {
          throw new Error(`${name}: not valid JSON (${error.message})`);
        }
      } else {
        args[name] = text;
      }
    }
    return args;
  }

  function syncRaw() {
    try {
      raw.value = JSON.stringify(fromFields(), null, 2);
      problem.textContent = '';
    } catch (error) {
      problem.textContent = error.message;
    }
  }
  raw.addEventListener('input', () => {
    rawEdited = true;
  });
  syncRaw();

  const submit = el('button', { type: 'submit', class: 'primary', 'data-testid': 'try-submit' }, 'Call');
  const result = el('pre', { 'data-testid': 'try-result', hidden: true });
  const meta = el('p', { class: 'muted' });
  // What the daemon answered, exactly: the MCP result, or the refusal.
  const exact = el('div', { 'data-testid': 'try-raw' });
  form.append(
    el('label', { class: 'raw-label' }, 'Arguments (JSON; edits here win over the fields)'), raw,
    el('div', { class: 'actions' }, submit), problem, meta, result, exact);

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    let args;
    try {
      args = rawEdited ? JSON.parse(raw.value || '{}') : fromFields();
      if (!args || typeof args !== 'object' || Array.isArray(args)) throw new Error('the arguments must be a JSON object');
    } catch (error) {
      problem.textContent = `Arguments: ${error.message}`;
      return;
    }
    problem.textContent = '';
    submit.disabled = true;
    result.hidden = false;
    result.dataset.outcome = 'pending';
    result.textContent = 'Calling… (if a policy holds the call, approve it on the Approvals page)';
    meta.textContent = '';
    exact.replaceChildren();
    try {
      const answer = await api(`/api/tools/${encodeURIComponent(tool.name)}/call`, { method: 'POST', body: { arguments: args }, what: 'Trying a tool' });
      const called = answer.result || {};
      result.dataset.outcome = called.isError ? 'error' : 'ok';
      result.textContent = resultText(called);
      meta.textContent = `${called.isError ? 'The tool reported an error' : 'Done'}${typeof answer.duration_ms === 'number' ? ` in ${answer.duration_ms} ms` : ''}.`;
      exact.replaceChildren(rawJson(called));
    } catch (error) {
      result.dataset.outcome = 'error';
      const kind = error.body && error.body.kind ? ` (${error.body.kind})` : '';
      result.textContent = `${errorText(error)}${kind}`;
      if (error.body) exact.replaceChildren(rawJson(error.body));
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

/// A call result as text: its text content, then other content kinds and structured content.
function resultText(result) {
  const parts = [];
  for (const item of Array.isArray(result.content) ? result.content : []) {
    if (item.type === 'text') parts.push(String(item.text ?? ''));
    else if (item.type === 'image' || item.type === 'audio') parts.push(`[${item.type} ${item.mimeType || ''}, ${String(item.data || '').length} base64 characters]`);
    else if (item.type === 'resource') parts.push(`[resource ${item.resource && item.resource.uri}]\n${item.resource && item.resource.text ? item.resource.text : ''}`);
    else if (item.type === 'resource_link') parts.push(`[link ${item.uri}]`);
    else parts.push(JSON.stringify(item, null, 2));
  }
  if (result.structuredContent !== undefined && parts.length === 0) {
    parts.push(JSON.stringify(result.structuredContent, null, 2));
  }
  return parts.join('\n') || '(no content)';
}
