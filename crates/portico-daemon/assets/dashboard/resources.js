// Resources: what the upstream servers offer to read, as the doors serve it to MCP clients
// (`portico://SERVER/URI`): the resources, the resource templates (a URI filled in from a small
// form), and one read, its contents shown readably and as raw JSON.

import { api, el, errorText, note } from './util.js';
import { breakable, resourceContent } from './content.js';
import { rawJson } from './raw.js';

/// The variables of an RFC 6570 URI template, in order, each once.
export function templateVariables(template) {
  const names = [];
  for (const [, , list] of String(template).matchAll(/\{([+#./;?&]?)([^}]+)\}/g)) {
    for (const spec of list.split(',')) {
      const name = spec.trim().replace(/(\*|:\d+)$/, '');
      if (name && !names.includes(name)) names.push(name);
    }
  }
  return names;
}

/// The template with `values` filled in (RFC 6570 levels 1 to 3; an empty value is left out).
export function expandTemplate(template, values) {
  return String(template).replace(/\{([+#./;?&]?)([^}]+)\}/g, (_, op, list) => {
    const names = list.split(',').map((spec) => spec.trim().replace(/(\*|:\d+)$/, ''));
    const given = names.filter((name) => values[name] !== undefined && values[name] !== '');
    if (given.length === 0) return '';
    const encode = op === '+' || op === '#' ? encodeURI : encodeURIComponent;
    if (op === '?' || op === '&') return op + given.map((name) => `${name}=${encode(values[name])}`).join('&');
    if (op === ';') return given.map((name) => `;${name}=${encode(values[name])}`).join('');
    const separator = op === '.' || op === '/' ? op : ',';
    const prefix = op === '#' || op === '.' || op === '/' ? op : '';
    return prefix + given.map((name) => encode(values[name])).join(separator);
  });
}

export function resourcesPage(section) {
  let loaded = false;
  let resources = [];
  let templates = [];
  let selected = null;
  const problem = el('p', { class: 'error', role: 'alert' });
  const resourceRows = el('tbody', { 'data-testid': 'resources-list' });
  const templateRows = el('tbody', { 'data-testid': 'templates-list' });
  const head = (...names) => el('thead', {}, el('tr', {}, names.map((h) => el('th', {}, h))));
  const detail = el('div', { class: 'panel', 'data-testid': 'resource-detail', hidden: true });
  const resourcesCount = el('span', { class: 'muted' });
  const templatesCount = el('span', { class: 'muted' });
  section.append(
    el('h2', {}, 'Resources'),
    el('p', { class: 'intro' }, 'What the servers offer MCP clients to read, under Portico’s URIs. Click a resource to read it, or a template to fill in its URI.'),
    problem,
    el('div', { class: 'browse' },
      el('div', {},
        el('h3', {}, 'Resources ', resourcesCount),
        el('table', { class: 'content-table' }, head('Name', 'URI'), resourceRows),
        el('h3', {}, 'Templates ', templatesCount),
        el('table', { class: 'content-table' }, head('Name', 'URI template'), templateRows)),
      detail));

  function row(attributes, cells, onPick) {
    const tr = el('tr', { ...attributes, class: 'clickable', tabindex: '0' }, cells);
    tr.addEventListener('click', onPick);
    tr.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') onPick();
    });
    return tr;
  }

  function nameCell(item) {
    const about = [item.server, item.mimeType].filter(Boolean).join(' · ');
    return el('td', { class: 'name' }, breakable(item.title || item.name || ''),
      about ? el('div', { class: 'muted' }, breakable(about)) : '');
  }

  function render() {
    resourceRows.replaceChildren(...resources.map((resource) => row(
      { 'data-resource': resource.uri },
      [nameCell(resource), el('td', { class: 'name' }, el('code', {}, breakable(resource.uri)))],
      () => pick({ resource }),
    )));
    if (resources.length === 0) resourceRows.append(el('tr', {}, el('td', { colspan: '2' }, note('No resources.'))));
    templateRows.replaceChildren(...templates.map((template) => row(
      { 'data-template': template.uriTemplate },
      [nameCell(template), el('td', { class: 'name' }, el('code', {}, breakable(template.uriTemplate)))],
      () => pick({ template }),
    )));
    if (templates.length === 0) templateRows.append(el('tr', {}, el('td', { colspan: '2' }, note('No resource templates.'))));
    resourcesCount.textContent = `(${resources.length})`;
    templatesCount.textContent = `(${templates.length})`;
    for (const tr of section.querySelectorAll('tr.clickable')) {
      const key = tr.dataset.resource ?? tr.dataset.template;
      tr.classList.toggle('selected', key === selected);
    }
  }

  /// Opens a resource (read at once) or a template (its form) in the detail panel.
  function pick({ resource, template }) {
    selected = resource ? resource.uri : template.uriTemplate;
    render();
    const item = resource || template;
    const result = el('div', { 'data-testid': 'resource-result', hidden: true });
    const parts = [
      el('h3', {}, item.title || item.name || selected),
      item.description ? el('p', { class: 'description' }, item.description) : '',
    ];
    if (resource) {
      parts.push(el('p', {}, el('code', {}, resource.uri)));
      const again = el('button', { type: 'button', 'data-testid': 'resource-read' }, 'Read again');
      again.addEventListener('click', () => read(resource.uri, result));
      parts.push(el('div', { class: 'actions' }, again));
    } else {
      parts.push(templateForm(template, result));
    }
    parts.push(result);
    detail.replaceChildren(...parts);
    detail.hidden = false;
    detail.scrollIntoView({ block: 'nearest' });
    if (resource) read(resource.uri, result);
  }

  function templateForm(template, result) {
    const form = el('form', { class: 'try', 'data-testid': 'template-form' });
    const inputs = new Map();
    const uri = el('code', { 'data-testid': 'template-uri' });
    const update = () => {
      const values = {};
      for (const [name, input] of inputs) values[name] = input.value;
      uri.textContent = expandTemplate(template.uriTemplate, values);
    };
    for (const name of templateVariables(template.uriTemplate)) {
      const id = `tpl-${name}`.replace(/[^A-Za-z0-9_-]/g, '_');
      const input = el('input', { type: 'text', id, 'data-var': name, required: true });
      input.addEventListener('input', update);
      inputs.set(name, input);
      form.append(el('div', { class: 'field' }, el('label', { for: id }, name), input));
    }
    update();
    const submit = el('button', { type: 'submit', class: 'primary', 'data-testid': 'template-read' }, 'Read');
    form.append(el('p', {}, 'URI: ', uri), el('div', { class: 'actions' }, submit));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      update();
      read(uri.textContent, result);
    });
    return form;
  }

  async function read(uri, result) {
    result.hidden = false;
    result.dataset.outcome = 'pending';
    result.replaceChildren(note(`Reading ${uri}…`));
    try {
      const answer = await api('/api/resources/read', { method: 'POST', body: { uri }, what: 'Reading a resource' });
      const contents = Array.isArray(answer.result?.contents) ? answer.result.contents : [];
      result.dataset.outcome = 'ok';
      result.replaceChildren(
        el('p', { class: 'muted' }, `${contents.length} item${contents.length === 1 ? '' : 's'}${typeof answer.duration_ms === 'number' ? ` in ${answer.duration_ms} ms` : ''}.`),
        ...contents.map(resourceContent),
        rawJson(answer.result));
    } catch (error) {
      result.dataset.outcome = 'error';
      result.replaceChildren(el('p', { class: 'error', 'data-field': 'error' }, errorText(error)),
        error.body ? rawJson(error.body) : '');
    }
  }

  async function load() {
    try {
      const [listed, templated] = await Promise.all([
        api('/api/resources', { what: 'The resources list' }),
        api('/api/resource-templates', { what: 'The resource templates list' }),
      ]);
      resources = Array.isArray(listed.resources) ? listed.resources : [];
      templates = Array.isArray(templated.resourceTemplates) ? templated.resourceTemplates : [];
      problem.textContent = listed.exposed === false ? 'This daemon serves no resources ([expose] resources = false).' : '';
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
      // A server came or went: the lists follow (the open detail stays as it is).
      if (type === 'server' && loaded) load();
    },
  };
}
