// Shared helpers of the dashboard's modules: building elements (text only: nothing from the server
// is ever parsed as HTML), calling the daemon's API, reading server-sent events from a fetch, and
// showing times and states.

/// An element with these attributes and children; strings become text nodes.
export function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export class ApiError extends Error {
  constructor(message, status, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

/// Where the session's page key is kept: this origin's storage, which a page on another port of the
/// host cannot read (the cookie, which every port receives, counts only beside the key).
const PAGE_KEY = 'portico.pageKey';

export const pageKey = {
  set: (key) => window.localStorage.setItem(PAGE_KEY, key),
  clear: () => window.localStorage.removeItem(PAGE_KEY),
};

/// The headers that say who the page is: the page key, when it is logged in.
export function sessionHeaders() {
  const key = window.localStorage.getItem(PAGE_KEY);
  return key ? { 'X-Portico-Page-Key': key } : {};
}

const listeners = { unauthorized: [] };

/// Called with no arguments whenever the API answers 401: the session is gone.
export function onUnauthorized(callback) {
  listeners.unauthorized.push(callback);
}

/// A JSON request to the daemon's own API; the session cookie (if any) rides along, nothing else
/// authenticates the page. Resolves to the parsed body (null for an empty one).
export async function api(path, options = {}) {
  const init = {
    method: options.method || 'GET',
    credentials: 'same-origin',
    cache: 'no-store',
    headers: { Accept: 'application/json', ...sessionHeaders() },
  };
  if (options.body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(options.body);
  }
  if (options.signal) init.signal = options.signal;
  const response = await fetch(path, init);
  const text = await response.text();
  let body = null;
  if (text !== '') {
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
  }
  if (!response.ok) {
    throw apiError(response.status, body, options.what || path);
  }
  return body;
}

export function apiError(status, body, what) {
  const hasError = body && typeof body.error === 'string';
  const message = hasError ? body.error : `${what} failed: HTTP ${status}`;
  if (status === 401) {
    for (const callback of listeners.unauthorized) callback();
  }
  return new ApiError(message, status, body);
}

/// Reads a `text/event-stream` body of a fetch response, calling `onEvent(type, data)` for each
/// event (data parsed as JSON when it is JSON). Resolves when the stream ends.
export async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let type = 'message';
  let data = [];
  const dispatch = () => {
    if (data.length > 0) {
      const text = data.join('\n');
      let value = text;
      try {
        value = JSON.parse(text);
      } catch {
        value = text;
      }
      onEvent(type, value);
    }
    type = 'message';
    data = [];
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let at;
    while ((at = buffer.search(/\r\n|\n|\r/)) >= 0) {
      const line = buffer.slice(0, at);
      buffer = buffer.slice(at + (buffer.startsWith('\r\n', at) ? 2 : 1));
      if (line === '') {
        dispatch();
      } else if (line.startsWith(':')) {
        // A keep-alive comment.
      } else {
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let rest = colon < 0 ? '' : line.slice(colon + 1);
        if (rest.startsWith(' ')) rest = rest.slice(1);
        if (field === 'event') type = rest;
        else if (field === 'data') data.push(rest);
      }
    }
  }
  dispatch();
}

function pad(number) {
  return String(number).padStart(2, '0');
}

/// `YYYY-MM-DD HH:MM:SS` in local time, from an RFC 3339 string or epoch milliseconds; '' for none.
export function localTime(value) {
  if (value === undefined || value === null || value === '') return '';
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) return String(value);
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())} ${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
}

/// The full RFC 3339 UTC form, for a title.
export function isoTime(value) {
  if (value === undefined || value === null || value === '') return '';
  if (typeof value === 'string') return value;
  const at = new Date(value);
  return Number.isNaN(at.getTime()) ? String(value) : at.toISOString();
}

/// A time cell: readable local time, the exact time as its title.
export function timeCell(value, attributes = {}) {
  const cell = el('td', { class: 'time', ...attributes }, localTime(value));
  const iso = isoTime(value);
  if (iso) cell.title = iso;
  return cell;
}

/// "3 h 12 min", "45 s": how long since `value`.
export function since(value) {
  if (!value) return '';
  const at = new Date(value).getTime();
  if (Number.isNaN(at)) return '';
  let seconds = Math.max(0, Math.round((Date.now() - at) / 1000));
  const days = Math.floor(seconds / 86400);
  seconds -= days * 86400;
  const hours = Math.floor(seconds / 3600);
  seconds -= hours * 3600;
  const minutes = Math.floor(seconds / 60);
  seconds -= minutes * 60;
  if (days > 0) return `${days} d ${hours} h`;
  if (hours > 0) return `${hours} h ${minutes} min`;
  if (minutes > 0) return `${minutes} min ${seconds} s`;
  return `${seconds} s`;
}

const GOOD = new Set(['ready', 'ok', 'approved', 'completed', 'done', 'consumed', 'task_state_completed']);
const BAD = new Set(['failed', 'error', 'denied', 'invalid', 'timeout', 'rejected', 'canceled', 'cancelled', 'task_state_failed', 'task_state_rejected', 'task_state_canceled', 'disabled', 'gave_up', 'needs_login', 'needs_secret']);
const WAITING = new Set(['pending', 'retrying', 'approval_requested', 'starting', 'restarting', 'working', 'submitted', 'input_required', 'auth_required', 'expired', 'task_state_working', 'task_state_submitted', 'task_state_input_required', 'task_state_auth_required']);

/// A name (a tool, server, principal, URL...) as text that may wrap only after `_`, `-`, `.` or
/// `/` (a `<wbr>` there; the style sheet breaks no word anywhere else): `mcp_everything_get_sum`
/// never becomes `mcp_everything_get_su m`. Children for `el`.
export function breakable(text) {
  const parts = String(text ?? '').split(/(?<=[_\-./])(?=.)/);
  return parts.flatMap((part, i) => (i === 0 ? [part] : [el('wbr'), part]));
}

/// A coloured chip naming a state.
export function chip(state, attributes = {}) {
  const word = String(state ?? '');
  const key = word.toLowerCase().replace(/[-\s]/g, '_');
  const tone = GOOD.has(key) ? 'ok' : BAD.has(key) ? 'bad' : WAITING.has(key) ? 'warn' : '';
  return el('span', { ...attributes, class: `chip ${tone}`.trim() }, word.replace(/^TASK_STATE_/, '').toLowerCase());
}

/// A paragraph saying something is not there (a missing route, an empty list).
export function note(text, attributes = {}) {
  return el('p', { class: 'unavailable', ...attributes }, text);
}

/// The text of an error for people.
export function errorText(error) {
  return error && error.message ? error.message : String(error);
}
