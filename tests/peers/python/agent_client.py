#!/usr/bin/env python3
"""MCP client on the official Python SDK (`mcp` 2.x) that calls Portico's agents, for the tests.

Run it with tests/peers/.venv/bin/python.

Usage:
  agent_client.py [options] --stdio PORTICO_BIN --config PATH   spawns `PORTICO_BIN mcp --standalone
                                                               --config PATH` (this process's whole
                                                               environment, PORTICO_HOME included, is
                                                               passed on) and speaks the SDK's
                                                               newline-delimited JSON to it
  agent_client.py [options] --http URL                         Streamable HTTP client of URL (/mcp)

Options:
  --call NAME [--args JSON]   tools/call, in command-line order; --args (a JSON object, default {})
                              belongs to the --call before it. Repeatable. The value "$CONV" in an
                              --args object stands for the conversation_id the previous call's
                              structuredContent returned.
  --sampling                  declare the sampling capability (with tools) and answer
                              sampling/createMessage deterministically (see `answer_sampling`);
                              every request received is recorded in the report
  --era legacy|auto           legacy (default): the initialize handshake, 2025-11-25;
                              auto: the SDK's mode="auto" (server/discover, else initialize)
  --timeout SECONDS           per-request timeout (default 60)

Output: ONE JSON object on stdout:
  {"protocol_version", "tools" (names), "calls": [{"name", "args", "result"}],
   "sampling_requests": [{"messages", "system_prompt", "tools", "max_tokens", "answer"}]}
where "result" is the CallToolResult dumped by alias without None fields.

Any failure (no connection, a JSON-RPC error, an exception in the sampling callback) is fatal:
the traceback goes to stderr and the exit status is 1; nothing is printed on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from contextlib import AsyncExitStack
from typing import Any

SAMPLING_MODEL = "agent-client-scripted"


class _Call(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        ns.calls.append({"name": value, "args": None})


class _Args(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        if not ns.calls or ns.calls[-1]["args"] is not None:
            parser.error("--args must follow a --call (one --args per --call)")
        obj = json.loads(value)
        if not isinstance(obj, dict):
            parser.error("--args must be a JSON object")
        ns.calls[-1]["args"] = obj


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="agent_client.py", description=__doc__.splitlines()[0])
    t = p.add_mutually_exclusive_group(required=True)
    t.add_argument("--stdio", metavar="PORTICO_BIN")
    t.add_argument("--http", metavar="URL")
    p.add_argument("--config", metavar="PATH")
    p.add_argument("--call", action=_Call, metavar="NAME")
    p.add_argument("--args", action=_Args, metavar="JSON")
    p.add_argument("--sampling", action="store_true")
    p.add_argument("--era", choices=["legacy", "auto"], default="legacy")
    p.add_argument("--timeout", type=float, default=60.0)
    p.set_defaults(calls=[])
    ns = p.parse_args(argv)
    if ns.stdio and not ns.config:
        p.error("--stdio needs --config")
    if ns.http and ns.config:
        p.error("--config is only for --stdio")
    return ns


def dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def substitute(value: Any, conversation_id: str | None) -> Any:
    if value == "$CONV":
        if conversation_id is None:
            raise RuntimeError("--args uses $CONV but no earlier call returned a conversation_id")
        return conversation_id
    if isinstance(value, dict):
        return {k: substitute(v, conversation_id) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, conversation_id) for v in value]
    return value


def block_text(block: Any) -> str:
    """The text of a sampling content block: a text block's text, a tool result's text content."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind == "tool_result":
        return "".join(getattr(c, "text", "") for c in block.content)
    return ""


def answer_sampling(params: Any) -> tuple[Any, dict[str, Any]]:
    """The deterministic model: (the CreateMessageResult, its summary for the report).

    Offered tools and no tool result in the conversation yet: a tool_use of `system_time` with {}
    (when offered). Otherwise text: "sampled: " + the newest tool result's text, or else the last
    user message's text.
    """
    import mcp_types as types

    blocks = [(m.role, b) for m in params.messages for b in m.content_as_list]
    tool_results = [b for role, b in blocks if getattr(b, "type", None) == "tool_result"]
    offered = [t.name for t in (params.tools or [])]
    if offered and not tool_results and "system_time" in offered:
        use = types.ToolUseContent(id="use_1", name="system_time", input={})
        result = types.CreateMessageResultWithTools(
            role="assistant", content=[use], model=SAMPLING_MODEL, stop_reason="toolUse"
        )
        return result, {"tool_use": "system_time"}
    if tool_results:
        source = block_text(tool_results[-1])
    else:
        user_texts = [block_text(b) for role, b in blocks if role == "user" and getattr(b, "type", None) == "text"]
        if not user_texts:
            raise RuntimeError(f"sampling request without a user text message: {dump(params)}")
        source = user_texts[-1]
    text = "sampled: " + source
    result = types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(text=text),
        model=SAMPLING_MODEL,
        stop_reason="endTurn",
    )
    return result, {"text": text}


async def run(ns: argparse.Namespace, out: dict[str, Any], callback_errors: list[BaseException]) -> None:
    import mcp_types as types
    from importlib.metadata import version as package_version
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    async def sampling_callback(context: Any, params: Any) -> Any:
        try:
            entry: dict[str, Any] = {
                "messages": [dump(m) for m in params.messages],
                "system_prompt": params.system_prompt,
                "tools": [t.name for t in (params.tools or [])],
                "max_tokens": params.max_tokens,
            }
            result, entry["answer"] = answer_sampling(params)
            out["sampling_requests"].append(entry)
            return result
        except BaseException as e:
            callback_errors.append(e)
            traceback.print_exc()
            raise

    options: dict[str, Any] = dict(
        mode=ns.era,
        read_timeout_seconds=ns.timeout,
        client_info=types.Implementation(name="portico-agent-client", version=package_version("mcp")),
        cache=None,
    )
    if ns.sampling:
        options["sampling_callback"] = sampling_callback
        options["sampling_capabilities"] = types.SamplingCapability(tools=types.SamplingToolsCapability())

    if ns.stdio:
        server: Any = StdioServerParameters(
            command=ns.stdio,
            args=["mcp", "--standalone", "--config", ns.config],
            env=dict(os.environ),
        )
    else:
        server = ns.http

    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(Client(server, **options))
        out["protocol_version"] = client.protocol_version
        tools = (await client.list_tools()).tools
        out["tools"] = [t.name for t in tools]
        conversation_id: str | None = None
        for call in ns.calls:
            args = substitute(call["args"] or {}, conversation_id)
            result = await client.call_tool(call["name"], args)
            dumped = dump(result)
            out["calls"].append({"name": call["name"], "args": args, "result": dumped})
            structured = dumped.get("structuredContent")
            if isinstance(structured, dict) and isinstance(structured.get("conversation_id"), str):
                conversation_id = structured["conversation_id"]


def main() -> None:
    ns = parse_args(sys.argv[1:])
    import anyio

    out: dict[str, Any] = {"protocol_version": None, "tools": None, "calls": [], "sampling_requests": []}
    callback_errors: list[BaseException] = []
    try:
        anyio.run(run, ns, out, callback_errors)
    except BaseException:
        traceback.print_exc()
        print(f"agent_client: failed; gathered so far: {json.dumps(out)}", file=sys.stderr, flush=True)
        sys.exit(1)
    if callback_errors:
        print(f"agent_client: the sampling callback failed {len(callback_errors)} time(s)", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
