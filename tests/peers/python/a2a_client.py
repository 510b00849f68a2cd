#!/usr/bin/env python3
"""A2A client on the official Python SDK (a2a-sdk 1.3.0), for Portico's tests.

Run it with tests/peers/.venv/bin/python.

Usage:
  a2a_client.py --card-url BASE [--card-path PATH] [--transport jsonrpc|rest]
                [--version 1.0|0.3] [--interface-url URL] [--timeout SECONDS]
                [--log-bodies] ACTION...

  --card-url BASE       the agent's base URL; the card is fetched from BASE/.well-known/agent-card.json
                        (or BASE + --card-path) with the SDK's A2ACardResolver rules (1.0 card, or a
                        0.3 card converted by the SDK)
  --transport           jsonrpc (default) or rest (HTTP+JSON)
  --version             1.0 (default) or 0.3. The SDK picks its transport class from the
                        `protocolVersion` of the card interface it uses, so this script keeps only
                        the card interfaces of that binding whose protocolVersion has that
                        major.minor, and hands the SDK that card (1.0 -> JsonRpcTransport /
                        RestTransport, 0.3 -> CompatJsonRpcTransport / CompatRestTransport).
  --interface-url URL   use URL as the interface (binding/version from the flags above) instead
                        of the card's; the card is still fetched and reported
  --timeout SECONDS     per-request timeout (default 30)
  --log-bodies          also put each request's JSON body ("request_body") and each non-SSE
                        response body ("response_body") into the "http" entries

Actions, run in command-line order (each is recorded; "the last task" is the task id/context id
the latest action returned):
  --send TEXT           SendMessage (blocking) with a new user message
  --stream TEXT         SendStreamingMessage; every event is recorded
  --stream-cancel TEXT  SendStreamingMessage; after the first event that names a task, CancelTask
                        is sent for it while the stream goes on; all events are recorded
  --get                 GetTask of the last task
  --list                ListTasks (no filter). The SDK's 0.3 transports refuse it (no RPC in 0.3):
                        recorded as an error of type NotImplementedError
  --cancel              CancelTask of the last task
  --continue TEXT       send TEXT as a follow-up on the last task (message.taskId + contextId),
                        blocking; multi-turn (e.g. answering input-required)
  --continue-stream TEXT  the same, streaming
  --return-immediately  modifier: the NEXT --send/--continue sets
                        SendMessageConfiguration.returnImmediately = true (0.3: blocking = false),
                        e.g. `--return-immediately --send "slow x" --cancel`

Output: ONE JSON object on stdout (indent 2):
  {"sdk": "a2a-sdk 1.3.0", "language": "python", "card_url", "transport", "version",
   "card": {"name", "description", "version", "url" (0.3 top-level url, else null),
            "protocol_version" (0.3 top-level, else null), "capabilities": {"streaming",
            "push_notifications", "extended_agent_card"}, "skills": [{"id", "name"}],
            "supported_interfaces": [{"url", "protocol_binding", "protocol_version", "tenant"}]},
   "card_raw": <the card JSON as served>,
   "selected_interface": {"url", "protocol_binding", "protocol_version"},
   "error": null | ERROR            (card / interface selection failed; then no actions ran)
   "actions": [{"action", "input", "ok", "response_kind": "task"|"message"|null,
                "return_immediately" (send/continue only),
                "task_id", "context_id", "state" (e.g. "TASK_STATE_COMPLETED"),
                "status_message" (text of status.message), "artifacts": [text...],
                "artifact_parts": [[PART...]...] (each artifact's parts as the SDK parsed them, in
                the proto JSON form: {"text"} | {"raw", "filename", "mediaType"} | {"url", ...} |
                {"data"}),
                "message_text" (when the answer is a Message), "events": [EVENT...],
                "tasks": [{"id","context_id","state"}] (list only), "next_page_token", "total_size",
                "cancel_result": {...} (stream-cancel only), "error": null | ERROR}],
   "http": [{"method", "url", "a2a_version", "content_type", "accept", "jsonrpc_method",
             "status", "response_content_type"}],
   "ok": true when no action has an error}
  EVENT = {"kind": "task"|"status-update"|"artifact-update"|"message", "task_id", "context_id",
           "state", "text" (status/message text), "artifact" (artifact text), "artifact_name",
           "append", "last_chunk"}
  ERROR = {"type" (SDK exception class), "code" (JSON-RPC code, mapped from the SDK error class
           or parsed from "JSON-RPC Error N"), "http_status" (REST / HTTP errors), "message", "data"}
States use the 1.0 enum names (TASK_STATE_...) for both protocol versions (the SDK converts 0.3).

A2A errors (JSON-RPC error objects, REST error bodies, HTTP errors, card resolution failures)
are data: recorded, exit status 0. Anything unexpected: traceback on stderr, exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import traceback
import uuid
from typing import Any

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import ClientCallContext, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.client.errors import A2AClientError, AgentCardResolutionError
from a2a.helpers import get_artifact_text, get_message_text, new_text_part
from a2a.types.a2a_pb2 import (
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError

SDK = "a2a-sdk 1.3.0"


class _Act(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        name = option_string.lstrip("-")
        if name == "return-immediately":
            ns.pending_ri = True
            return
        act = {"action": name, "input": value if self.nargs != 0 else None, "return_immediately": False}
        if name in ("send", "continue") and ns.pending_ri:
            act["return_immediately"] = True
            ns.pending_ri = False
        ns.actions.append(act)


def state_name(state: int) -> str:
    return TaskState.Name(state)


def error_info(exc: BaseException, http_log: list[dict]) -> dict[str, Any]:
    code = None
    for cls, c in JSON_RPC_ERROR_CODE_MAP.items():
        if type(exc) is cls:
            code = c
            break
    message = getattr(exc, "message", None) or str(exc)
    m = re.match(r"JSON-RPC Error (-?\d+):", str(exc))
    if code is None and m:
        code = int(m.group(1))
    http_status = getattr(exc, "status_code", None)
    m = re.search(r"HTTP Error:? (\d{3})", str(exc))
    if http_status is None and m:
        http_status = int(m.group(1))
    if http_status is None and http_log and (http_log[-1].get("status") or 0) >= 400:
        http_status = http_log[-1]["status"]
    return {
        "type": type(exc).__name__,
        "code": code,
        "http_status": http_status,
        "message": message,
        "data": getattr(exc, "data", None),
    }


def event_record(ev: StreamResponse) -> dict[str, Any]:
    rec: dict[str, Any] = {"kind": None, "task_id": None, "context_id": None, "state": None,
                           "text": None, "artifact": None, "artifact_name": None,
                           "append": None, "last_chunk": None}
    which = ev.WhichOneof("payload")
    if which == "task":
        t = ev.task
        rec.update(kind="task", task_id=t.id, context_id=t.context_id, state=state_name(t.status.state),
                   text=get_message_text(t.status.message) if t.status.HasField("message") else None)
    elif which == "message":
        m = ev.message
        rec.update(kind="message", task_id=m.task_id or None, context_id=m.context_id or None,
                   text=get_message_text(m))
    elif which == "status_update":
        s = ev.status_update
        rec.update(kind="status-update", task_id=s.task_id, context_id=s.context_id,
                   state=state_name(s.status.state),
                   text=get_message_text(s.status.message) if s.status.HasField("message") else None)
    elif which == "artifact_update":
        a = ev.artifact_update
        rec.update(kind="artifact-update", task_id=a.task_id, context_id=a.context_id,
                   artifact=get_artifact_text(a.artifact), artifact_name=a.artifact.name or None,
                   append=a.append, last_chunk=a.last_chunk)
    return rec


def new_record(action: str, value: str | None) -> dict[str, Any]:
    return {"action": action, "input": value, "ok": True, "response_kind": None, "task_id": None,
            "context_id": None, "state": None, "status_message": None, "artifacts": [],
            "message_text": None, "artifact_parts": [], "events": [], "error": None}


def apply_task(rec: dict[str, Any], task: Task) -> None:
    rec["response_kind"] = "task"
    rec["task_id"] = task.id
    rec["context_id"] = task.context_id
    rec["state"] = state_name(task.status.state)
    rec["status_message"] = get_message_text(task.status.message) if task.status.HasField("message") else None
    rec["artifacts"] = [get_artifact_text(a) for a in task.artifacts]
    rec["artifact_parts"] = [[MessageToDict(p) for p in a.parts] for a in task.artifacts]


def apply_message(rec: dict[str, Any], msg: Message) -> None:
    rec["response_kind"] = "message"
    rec["task_id"] = msg.task_id or None
    rec["context_id"] = msg.context_id or None
    rec["message_text"] = get_message_text(msg)


def apply_events(rec: dict[str, Any]) -> None:
    """Fold streamed events into the record's summary fields."""
    artifacts: list[str] = []
    for ev in rec["events"]:
        if ev["task_id"]:
            rec["task_id"] = ev["task_id"]
        if ev["context_id"]:
            rec["context_id"] = ev["context_id"]
        if ev["kind"] == "task":
            rec["response_kind"] = "task"
            rec["state"] = ev["state"]
            rec["status_message"] = ev["text"]
        elif ev["kind"] == "status-update":
            rec["response_kind"] = "task"
            rec["state"] = ev["state"]
            rec["status_message"] = ev["text"]
        elif ev["kind"] == "artifact-update":
            artifacts.append(ev["artifact"])
        elif ev["kind"] == "message":
            rec["response_kind"] = rec["response_kind"] or "message"
            rec["message_text"] = ev["text"]
    rec["artifacts"] = artifacts


def card_summary(card: AgentCard, raw: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": card.name,
        "description": card.description,
        "version": card.version,
        "url": raw.get("url"),
        "protocol_version": raw.get("protocolVersion"),
        "capabilities": {
            "streaming": card.capabilities.streaming,
            "push_notifications": card.capabilities.push_notifications,
            "extended_agent_card": card.capabilities.extended_agent_card,
        },
        "skills": [{"id": s.id, "name": s.name} for s in card.skills],
        "supported_interfaces": [
            {"url": i.url, "protocol_binding": i.protocol_binding,
             "protocol_version": i.protocol_version, "tenant": i.tenant}
            for i in card.supported_interfaces
        ],
    }


def same_minor(v: str, want: str) -> bool:
    parts = v.split(".")
    return ".".join(parts[:2]) == want if len(parts) >= 2 else v == want


async def run(args: argparse.Namespace) -> dict[str, Any]:
    http_log: list[dict[str, Any]] = []

    async def on_request(request: httpx.Request) -> None:
        entry: dict[str, Any] = {
            "method": request.method,
            "url": str(request.url),
            "a2a_version": request.headers.get("a2a-version"),
            "content_type": request.headers.get("content-type"),
            "accept": request.headers.get("accept"),
            "jsonrpc_method": None,
            "status": None,
            "response_content_type": None,
        }
        try:
            body = json.loads(request.content) if request.content else None
            if isinstance(body, dict) and "jsonrpc" in body:
                entry["jsonrpc_method"] = body.get("method")
            if args.log_bodies:
                entry["request_body"] = body
        except (ValueError, httpx.RequestNotRead):
            pass
        request.extensions["portico_log"] = entry
        http_log.append(entry)

    async def on_response(response: httpx.Response) -> None:
        entry = response.request.extensions.get("portico_log")
        if entry is not None:
            entry["status"] = response.status_code
            entry["response_content_type"] = response.headers.get("content-type")
            if args.log_bodies and "text/event-stream" not in (entry["response_content_type"] or ""):
                await response.aread()
                try:
                    entry["response_body"] = response.json()
                except ValueError:
                    entry["response_body"] = response.text

    binding = TransportProtocol.JSONRPC if args.transport == "jsonrpc" else TransportProtocol.HTTP_JSON
    report: dict[str, Any] = {
        "sdk": SDK, "language": "python", "card_url": args.card_url, "transport": args.transport,
        "version": args.version, "card": None, "card_raw": None, "selected_interface": None,
        "error": None, "actions": [], "http": http_log, "ok": False,
    }

    async with httpx.AsyncClient(timeout=args.timeout,
                                 event_hooks={"request": [on_request], "response": [on_response]}) as http:
        # The SDK's ClientFactory puts `A2A-Version: 1.0` on the httpx client it is given (so
        # the card GET carries it too, as with ClientFactory.create_from_url).
        ClientFactory(ClientConfig(httpx_client=http))

        # 1. Card (raw JSON kept for the report; parsed with the SDK's own parser).
        card_url = args.card_url.rstrip("/") + "/" + (args.card_path or AGENT_CARD_WELL_KNOWN_PATH).lstrip("/")
        try:
            resp = await http.get(card_url)
            resp.raise_for_status()
            raw = resp.json()
            report["card_raw"] = raw
            card = parse_agent_card(json.loads(json.dumps(raw)))
        except (httpx.HTTPError, ValueError) as e:
            err = AgentCardResolutionError(f"Failed to fetch agent card from {card_url}: {e}",
                                           status_code=getattr(getattr(e, "response", None), "status_code", None))
            report["error"] = error_info(err, http_log)
            return report
        report["card"] = card_summary(card, raw)

        # 2. Keep only the interface(s) of the wanted binding + version.
        if args.interface_url:
            chosen = [AgentInterface(url=args.interface_url, protocol_binding=binding, protocol_version=args.version)]
        else:
            chosen = [i for i in card.supported_interfaces
                      if i.protocol_binding == binding and same_minor(i.protocol_version or "", args.version)]
        if not chosen:
            report["error"] = {"type": "NoMatchingInterface", "code": None, "http_status": None,
                               "message": f"the card lists no {binding.value} interface with protocolVersion {args.version}",
                               "data": None}
            return report
        filtered = AgentCard()
        filtered.CopyFrom(card)
        del filtered.supported_interfaces[:]
        filtered.supported_interfaces.append(chosen[0])
        report["selected_interface"] = {"url": chosen[0].url, "protocol_binding": chosen[0].protocol_binding,
                                        "protocol_version": chosen[0].protocol_version}

        def make_client(streaming: bool):
            config = ClientConfig(streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding],
                                  use_client_preference=True)
            return ClientFactory(config).create(filtered)

        client = make_client(streaming=True)  # streams when the card says capabilities.streaming
        blocking_client = make_client(streaming=False)  # always the non-streaming SendMessage
        ctx = ClientCallContext(timeout=args.timeout)

        last: dict[str, str | None] = {"task_id": None, "context_id": None}

        def user_message(text: str, follow_up: bool) -> Message:
            msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[new_text_part(text)])
            if follow_up:
                if last["task_id"]:
                    msg.task_id = last["task_id"]
                if last["context_id"]:
                    msg.context_id = last["context_id"]
            return msg

        def send_request(text: str, follow_up: bool, return_immediately: bool = False) -> SendMessageRequest:
            req = SendMessageRequest(message=user_message(text, follow_up))
            if return_immediately:
                req.configuration.return_immediately = True
            return req

        async def do_blocking_send(rec: dict[str, Any], text: str, follow_up: bool, ri: bool) -> None:
            async for resp in blocking_client.send_message(send_request(text, follow_up, ri), context=ctx):
                if resp.HasField("task"):
                    apply_task(rec, resp.task)
                elif resp.HasField("message"):
                    apply_message(rec, resp.message)

        async def do_stream(rec: dict[str, Any], text: str, follow_up: bool, cancel_first: bool) -> None:
            cancel_task: asyncio.Task | None = None
            async for ev in client.send_message(send_request(text, follow_up), context=ctx):
                er = event_record(ev)
                rec["events"].append(er)
                if cancel_first and cancel_task is None and er["task_id"]:
                    tid = er["task_id"]

                    async def _cancel(tid: str = tid) -> None:
                        try:
                            t = await client.cancel_task(CancelTaskRequest(id=tid), context=ctx)
                            rec["cancel_result"] = {"state": state_name(t.status.state), "error": None}
                        except (A2AError, NotImplementedError) as e:
                            rec["cancel_result"] = {"state": None, "error": error_info(e, http_log)}

                    cancel_task = asyncio.create_task(_cancel())
            if cancel_task is not None:
                await cancel_task
            apply_events(rec)

        for act in args.actions:
            name, value = act["action"], act["input"]
            rec = new_record(name, value)
            if name in ("send", "continue"):
                rec["return_immediately"] = act["return_immediately"]
            try:
                if name == "send":
                    await do_blocking_send(rec, value, False, act["return_immediately"])
                elif name == "continue":
                    await do_blocking_send(rec, value, True, act["return_immediately"])
                elif name == "stream":
                    await do_stream(rec, value, follow_up=False, cancel_first=False)
                elif name == "continue-stream":
                    await do_stream(rec, value, follow_up=True, cancel_first=False)
                elif name == "stream-cancel":
                    rec["cancel_result"] = None
                    await do_stream(rec, value, follow_up=False, cancel_first=True)
                elif name in ("get", "cancel"):
                    if not last["task_id"]:
                        raise LookupError(f"--{name}: no task yet (run --send/--stream first)")
                    if name == "get":
                        task = await client.get_task(GetTaskRequest(id=last["task_id"]), context=ctx)
                    else:
                        task = await client.cancel_task(CancelTaskRequest(id=last["task_id"]), context=ctx)
                    apply_task(rec, task)
                elif name == "list":
                    resp = await client.list_tasks(ListTasksRequest(), context=ctx)
                    rec["tasks"] = [{"id": t.id, "context_id": t.context_id, "state": state_name(t.status.state)}
                                    for t in resp.tasks]
                    rec["next_page_token"] = resp.next_page_token
                    rec["total_size"] = resp.total_size
            except (A2AError, NotImplementedError) as e:
                rec["ok"] = False
                rec["error"] = error_info(e, http_log)
                if rec["events"]:
                    apply_events(rec)
            if rec["task_id"]:
                last["task_id"] = rec["task_id"]
                last["context_id"] = rec["context_id"]
            report["actions"].append(rec)

        await client.close()
        await blocking_client.close()

    report["ok"] = report["error"] is None and all(a["ok"] for a in report["actions"])
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.set_defaults(actions=[])
    ap.add_argument("--card-url", required=True)
    ap.add_argument("--card-path", default=None)
    ap.add_argument("--transport", choices=["jsonrpc", "rest"], default="jsonrpc")
    ap.add_argument("--version", choices=["1.0", "0.3"], default="1.0")
    ap.add_argument("--interface-url", default=None)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--log-bodies", action="store_true")
    ap.set_defaults(pending_ri=False)
    ap.add_argument("--return-immediately", action=_Act, nargs=0)
    for flag in ("--send", "--stream", "--stream-cancel", "--continue", "--continue-stream"):
        ap.add_argument(flag, action=_Act, metavar="TEXT")
    for flag in ("--get", "--list", "--cancel"):
        ap.add_argument(flag, action=_Act, nargs=0)
    args = ap.parse_args()
    try:
        report = asyncio.run(run(args))
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return 1
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
