#!/usr/bin/env python3
"""A2A echo agent built on the official Python SDK (a2a-sdk 1.3.0), for Portico's tests.

Run it with tests/peers/.venv/bin/python.

Usage:
  a2a_echo_server.py [--port 0] [--host 127.0.0.1] [--name NAME]
                     [--versions 1.0,0.3] [--transports jsonrpc,rest] [--slow-ms 300]

Listens on http://HOST:PORT (port 0 = any free port). Once uvicorn serves, ONE line goes
to stdout (nothing else is written there):
  LISTENING http://127.0.0.1:PORT
Logs go to stderr. SIGTERM / SIGINT stop it (uvicorn re-raises the signal: status 143 / 130).

Endpoints (the same layout as js/a2a_echo_server.mjs):
  GET  /.well-known/agent-card.json   the agent card (1.0 `supportedInterfaces` plus, when 0.3
                                      is served, the 0.3 top-level `url`/`preferredTransport`/
                                      `protocolVersion`/`additionalInterfaces` fields)
  POST /a2a/jsonrpc                   JSON-RPC: 1.0 methods (SendMessage, ...) and, with 0.3,
                                      the 0.3 methods (message/send, ...) on the same URL
  /a2a/rest/...                       HTTP+JSON: 1.0 routes (/message:send, /tasks/{id}, ...)
                                      and, with 0.3, the 0.3 routes under /v1 (/v1/message:send)
The card lists one interface per (transport, version) served, 1.0 first:
  JSONRPC 1.0 /a2a/jsonrpc, HTTP+JSON 1.0 /a2a/rest, JSONRPC 0.3 /a2a/jsonrpc, HTTP+JSON 0.3 /a2a/rest.
The SDK picks the handler by the request's A2A-Version header: 1.0 methods/routes need
`A2A-Version: 1.x` (absent means 0.3 -> error -32009 VersionNotSupported); 0.3 ones accept an
absent header or 0.x.

Agent behaviour (by the text of the user message):
  "slow ..."  -> Task submitted, status working ("working on: <text>"), waits --slow-ms (300),
                 artifact "echo: <text>", completed. Cancel it while it waits.
  "ask ..."   -> Task submitted, status input-required with the question
                 "question: what is your answer?". The follow-up message on the same task
                 (same taskId/contextId) gets artifact "answered: <follow-up text>" and
                 completed with status message "answered: <follow-up text>".
  otherwise   -> Task submitted, working, artifact "echo: <text>", completed.
  Cancel      -> status canceled with message "canceled".
Streaming is supported (capabilities.streaming = true); ListTasks works (1.0 only).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys

import uvicorn
from starlette.applications import Starlette

from a2a.helpers import new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
    Task,
    TaskState,
    TaskStatus,
)

log = logging.getLogger("a2a_echo_server")

JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"
QUESTION = "question: what is your answer?"


class EchoExecutor(AgentExecutor):
    def __init__(self, slow_ms: int) -> None:
        self.slow_s = slow_ms / 1000.0

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        task_id = context.task_id
        context_id = context.context_id
        updater = TaskUpdater(event_queue, task_id, context_id)

        if task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            # Multi-turn: the answer to our question.
            answer = f"answered: {text}"
            await updater.start_work()
            await updater.add_artifact([new_text_part(answer)], name="answer")
            await updater.complete(updater.new_agent_message([new_text_part(answer)]))
            return

        if task is None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message] if context.message else [],
                )
            )

        if text.startswith("ask"):
            await updater.requires_input(updater.new_agent_message([new_text_part(QUESTION)]))
            return

        if text.startswith("slow"):
            await updater.start_work(updater.new_agent_message([new_text_part(f"working on: {text}")]))
            await asyncio.sleep(self.slow_s)
        else:
            await updater.start_work()
        await updater.add_artifact([new_text_part(f"echo: {text}")], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel(updater.new_agent_message([new_text_part("canceled")]))


def build_card(base: str, name: str, versions: list[str], transports: list[str]) -> AgentCard:
    interfaces = []
    for version in versions:
        for transport in transports:
            if transport == "jsonrpc":
                interfaces.append(AgentInterface(url=base + JSONRPC_PATH, protocol_binding="JSONRPC", protocol_version=version))
            else:
                interfaces.append(AgentInterface(url=base + REST_PATH, protocol_binding="HTTP+JSON", protocol_version=version))
    return AgentCard(
        name=name,
        description="Echo agent (a2a-sdk Python) for Portico's tests: echo / slow / ask.",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="echo",
                name="Echo",
                description="Echoes the text back; 'slow ...' waits, 'ask ...' asks a question first.",
                tags=["echo", "test"],
                examples=["hello", "slow hello", "ask something"],
            )
        ],
    )


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--name", default="portico-a2a-echo-py")
    ap.add_argument("--versions", default="1.0,0.3", help="comma list of 1.0 and/or 0.3")
    ap.add_argument("--transports", default="jsonrpc,rest", help="comma list of jsonrpc and/or rest")
    ap.add_argument("--slow-ms", type=int, default=300)
    ap.add_argument("--log-level", default="WARNING")
    args = ap.parse_args()

    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="a2a_echo_server: %(levelname)s %(name)s: %(message)s")
    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    if not versions or any(v not in ("1.0", "0.3") for v in versions):
        ap.error("--versions takes 1.0 and/or 0.3")
    if not transports or any(t not in ("jsonrpc", "rest") for t in transports):
        ap.error("--transports takes jsonrpc and/or rest")

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    port = sock.getsockname()[1]
    base = f"http://{args.host}:{port}"

    card = build_card(base, args.name, versions, transports)
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(args.slow_ms),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    compat = "0.3" in versions
    routes = list(create_agent_card_routes(card))
    if "jsonrpc" in transports:
        routes += create_jsonrpc_routes(handler, JSONRPC_PATH, enable_v0_3_compat=compat)
    if "rest" in transports:
        routes += create_rest_routes(handler, enable_v0_3_compat=compat, path_prefix=REST_PATH)
    app = Starlette(routes=routes)

    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    # uvicorn handles SIGTERM/SIGINT: graceful stop (open streams get 1 s), then it re-raises
    # the signal, so the exit status is that of the signal (143 for SIGTERM).
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.01)
        sys.stdout.write(f"LISTENING {base}\n")
        sys.stdout.flush()

    announcer = asyncio.create_task(announce())
    await server.serve(sockets=[sock])
    announcer.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
