// Agents: each configured agent with its model and tools, a chat whose answer streams in as the
// model writes (POST /api/agents/{name}/message with "stream": true, read as server-sent events),
// and the agent's past conversations, which load into the chat to be continued.

import { api, apiError, el, errorText, localTime, note, readEvents, sessionHeaders } from './util.js';

export function agentsPage(section, context) {
  let loaded = false;
  let agents = [];
  let current = null;
  let conversationId = null;
  let sending = false;
  const problem = el('p', { class: 'error', role: 'alert' });
  const list = el('ul', { class: 'list', 'aria-label': 'Agents' });
  const config = el('div', { 'data-testid': 'agent-config' });
  const log = el('div', { class: 'chat-log', 'data-testid': 'chat-log', 'aria-live': 'polite' });
  const input = el('textarea', { 'data-testid': 'chat-input', rows: '2', placeholder: 'Message (Ctrl+Enter sends)', 'aria-label': 'Message' });
  const send = el('button', { type: 'button', class: 'primary', 'data-testid': 'chat-send' }, 'Send');
  const fresh = el('button', { type: 'button', 'data-testid': 'chat-new' }, 'New conversation');
  const conversations = el('ul', { class: 'list', 'data-testid': 'conversations', 'aria-label': 'Conversations' });
  const where = el('p', { class: 'muted', 'data-testid': 'conversation-id' });
  const chat = el('div', { class: 'panel', hidden: true },
    config,
    el('h3', {}, 'Chat'), where, log,
    el('div', { class: 'chat-form' }, input, send, fresh),
    el('h3', {}, 'Conversations'), conversations);
  const empty = note('No agents are configured ([[agents]] in the config).', { hidden: true });
  section.append(
    el('h2', {}, 'Agents'),
    el('p', { class: 'intro' }, 'Talk to an agent; its tool calls go through the same policies and audit as every other call.'),
    problem, empty,
    el('div', { class: 'split' }, list, chat));

  send.addEventListener('click', () => sendMessage());
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      sendMessage();
    }
  });
  fresh.addEventListener('click', () => {
    conversationId = null;
    log.replaceChildren();
    showWhere();
    for (const li of conversations.querySelectorAll('li')) li.classList.remove('selected');
  });

  function showWhere() {
    where.textContent = conversationId ? `Conversation ${conversationId}` : 'A new conversation';
  }

  function renderList() {
    list.replaceChildren(...agents.map((agent) => {
      const li = el('li', { 'data-agent': agent.name, tabindex: '0', class: current === agent.name ? 'selected' : '' },
        el('strong', {}, agent.name),
        // Not offered as a tool or A2A agent until it has one (GET /api/agents says what to set).
        agent.needs_model ? el('span', { class: 'chip warn', 'data-field': 'needs-model' }, 'needs a model') : '',
        agent.description ? el('span', { class: 'muted' }, agent.description) : '');
      li.addEventListener('click', () => select(agent.name));
      li.addEventListener('keydown', (event) => {
        if (event.key === 'Enter') select(agent.name);
      });
      return li;
    }));
    empty.hidden = agents.length > 0;
  }

  function select(name) {
    const agent = agents.find((a) => a.name === name);
    if (!agent) return;
    if (current !== name) {
      conversationId = null;
      log.replaceChildren();
    }
    current = name;
    for (const li of list.querySelectorAll('li')) li.classList.toggle('selected', li.dataset.agent === name);
    const facts = el('dl', { class: 'facts' },
      el('dt', {}, 'Model'), el('dd', { 'data-field': 'model' }, agent.model || ''),
      el('dt', {}, 'Tool'), el('dd', { 'data-field': 'tool' }, agent.needs_model
        ? 'not offered until it has a model'
        : el('code', {}, agent.tool || '')),
      el('dt', {}, 'Tools'), el('dd', { 'data-field': 'tools' }, (agent.tools || []).join(', ') || '(none)'));
    const fix = agent.needs_model ? note(agent.needs_model, { 'data-field': 'model-fix' }) : '';
    config.replaceChildren(el('h3', {}, agent.name), agent.description ? el('p', {}, agent.description) : '', fix, facts);
    send.disabled = Boolean(agent.needs_model) || sending;
    chat.hidden = false;
    showWhere();
    loadConversations();
  }

  function message(kind, text) {
    const node = el('div', { class: `msg ${kind}` }, text);
    log.append(node);
    log.scrollTop = log.scrollHeight;
    return node;
  }

  async function sendMessage() {
    const text = input.value.trim();
    if (text === '' || !current || sending) return;
    sending = true;
    send.disabled = true;
    input.value = '';
    message('user', text);
    const answer = message('assistant', '');
    answer.dataset.state = 'streaming';
    const body = { message: text, stream: true };
    if (conversationId) body.conversation_id = conversationId;
    try {
      const response = await fetch(`/api/agents/${encodeURIComponent(current)}/message`, {
        method: 'POST',
        credentials: 'same-origin',
        cache: 'no-store',
        headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', ...sessionHeaders() },
        body: JSON.stringify(body),
      });
      if (!response.ok) {
        let error = null;
        try {
          error = await response.json();
        } catch {
          error = null;
        }
        throw apiError(response.status, error, 'Sending a message');
      }
      let finished = false;
      await readEvents(response, (type, data) => {
        if (type === 'text' && data && typeof data.text === 'string') {
          answer.textContent += data.text;
          // How many pieces the answer came in (the tests read it: proof it streamed).
          answer.dataset.chunks = String(Number(answer.dataset.chunks || 0) + 1);
          log.scrollTop = log.scrollHeight;
        } else if (type === 'tool' && data) {
          const line = message('tool', `${data.state === 'started' ? '→' : data.state === 'failed' ? '✗' : '✓'} ${data.name} ${data.state}`);
          // The answer keeps streaming below its tool calls.
          log.append(answer);
          line.dataset.tool = data.name;
        } else if (type === 'status' && data && data.message) {
          message('tool', `${data.state}: ${data.message}`);
          log.append(answer);
        } else if (type === 'reply') {
          finished = true;
          if (data && typeof data.reply === 'string') answer.textContent = data.reply;
          if (data && typeof data.conversation_id === 'string') conversationId = data.conversation_id;
          answer.dataset.state = 'done';
        } else if (type === 'error') {
          finished = true;
          answer.classList.replace('assistant', 'error');
          answer.textContent = data && data.error ? data.error : String(data);
          answer.dataset.state = 'error';
        }
      });
      if (!finished) {
        answer.dataset.state = 'error';
        message('error', 'The answer stopped before it ended (the connection closed).');
      }
    } catch (error) {
      answer.classList.replace('assistant', 'error');
      answer.dataset.state = 'error';
      answer.textContent = errorText(error);
    } finally {
      sending = false;
      send.disabled = false;
      if (answer.textContent === '' && answer.dataset.state === 'done') answer.textContent = '(no text)';
      showWhere();
      loadConversations();
    }
  }

  async function loadConversations() {
    const agent = current;
    if (!agent) return;
    try {
      const answer = await api(`/api/conversations?agent=${encodeURIComponent(agent)}&limit=50`, { what: 'The conversations list' });
      if (agent !== current) return;
      const rows = (answer.conversations || []).map((c) => {
        const li = el('li', { 'data-conversation': c.id, tabindex: '0', class: c.id === conversationId ? 'selected' : '' },
          c.title || '(no title)',
          el('span', { class: 'muted' }, `${localTime(c.updated_at)} · ${c.message_count} messages`));
        li.addEventListener('click', () => openConversation(c.id));
        return li;
      });
      conversations.replaceChildren(...(rows.length > 0 ? rows : [el('li', { class: 'muted' }, 'No conversations yet.')]));
    } catch (error) {
      conversations.replaceChildren(el('li', { class: 'error' }, errorText(error)));
    }
  }

  async function openConversation(id) {
    try {
      const answer = await api(`/api/conversations/${encodeURIComponent(id)}`, { what: 'The conversation' });
      conversationId = id;
      log.replaceChildren();
      for (const stored of answer.messages || []) {
        const content = stored.content || {};
        const role = content.role || stored.role;
        if (role === 'user') {
          message('user', content.text ?? '');
        } else if (role === 'assistant') {
          for (const call of content.tool_calls || []) message('tool', `→ ${call.name} called`);
          if (content.text) message('assistant', content.text);
        } else if (role === 'tool') {
          message('tool', `${content.is_error ? '✗' : '✓'} ${content.name}: ${content.text ?? ''}`);
        }
      }
      for (const li of conversations.querySelectorAll('li')) li.classList.toggle('selected', li.dataset.conversation === id);
      showWhere();
    } catch (error) {
      message('error', errorText(error));
    }
  }

  async function load() {
    try {
      const answer = await api('/api/agents', { what: 'The agents list' });
      agents = Array.isArray(answer.agents) ? answer.agents : [];
      problem.textContent = '';
      loaded = true;
      renderList();
      if (current && agents.some((a) => a.name === current)) select(current);
      else if (agents.length === 1) select(agents[0].name);
    } catch (error) {
      problem.textContent = errorText(error);
    }
  }

  return {
    show() {
      return loaded ? Promise.resolve() : load();
    },
    reset() {
      loaded = false;
    },
  };
}
