#!/usr/bin/env python3
"""One MCP session through the official Python SDK (`mcp` 2.x `mcp.Client`, handshake era over
Streamable HTTP) that pauses half-way, for Portico's replica tests: the test kills the replica
holding the session during the pause and sees what the SDK does next.

Usage: sdk_session_pause.py URL TOOL ARGS_JSON [--header 'Name: value']...

Phase 1: connect (initialize), list the tools, call TOOL with ARGS_JSON; print one JSON line
  {"phase": 1, "session": <Mcp-Session-Id>, "protocol_version", "tools": [names], "call": outcome}
then wait for a line on stdin.
Phase 2: call TOOL twice more on the same Client (no reconnecting of our own), then close it and
  call TOOL through a new Client (a new initialize); print one JSON line
  {"phase": 2, "same_client": [outcome, outcome], "new_client": {"session", "call"},
   "exchanges": [[method, session sent, status, session received], ...]}
An outcome is {"result": {...}} or {"error": {"code", "message"}}. `exchanges` are every HTTP
request both Clients made, as httpx2's event hooks saw them (so a re-initialize the SDK made by
itself would show up as a POST answered with a new session id).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def outcome(coro_result: Any = None, error: BaseException | None = None) -> dict[str, Any]:
    from mcp.shared.exceptions import MCPError

    if error is None:
        return {"result": coro_result.model_dump(by_alias=True, exclude_none=True, mode="json")}
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, MCPError):
        return {"error": {"code": error.code, "message": error.message}}
    return {"error": {"code": None, "message": f"{type(error).__name__}: {error}"}}


async def call(client: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    try:
        return outcome(await client.call_tool(tool, args))
    except Exception as e:  # noqa: BLE001 - the test reads what the SDK raised
        return outcome(error=e)


async def main() -> None:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    url, tool, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    headers: dict[str, str] = {}
    rest = sys.argv[4:]
    while rest:
        if rest[0] != "--header" or len(rest) < 2:
            sys.exit(f"usage: {__doc__}")
        name, value = rest[1].split(":", 1)
        headers[name.strip()] = value.strip()
        rest = rest[2:]

    exchanges: list[list[Any]] = []

    async def on_response(response: Any) -> None:
        exchanges.append(
            [
                response.request.method,
                response.request.headers.get("mcp-session-id"),
                response.status_code,
                response.headers.get("mcp-session-id"),
            ]
        )

    def http_client() -> Any:
        return httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
            event_hooks={"response": [on_response]},
        )

    def session_of_last_initialize() -> str | None:
        for method, _, status, received in reversed(exchanges):
            if method == "POST" and received:
                return received
        return None

    async with http_client() as http:
        async with Client(
            streamable_http_client(url, http_client=http), mode="legacy", read_timeout_seconds=20, cache=None
        ) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            first = await call(client, tool, args)
            report = {
                "phase": 1,
                "session": session_of_last_initialize(),
                "protocol_version": client.protocol_version,
                "tools": tools,
                "call": first,
            }
            print(json.dumps(report), flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline)
            same = [await call(client, tool, args), await call(client, tool, args)]

    async with http_client() as http:
        before = len(exchanges)
        async with Client(
            streamable_http_client(url, http_client=http), mode="legacy", read_timeout_seconds=20, cache=None
        ) as client:
            new_call = await call(client, tool, args)
            new_session = next((e[3] for e in exchanges[before:] if e[0] == "POST" and e[3]), None)

    print(
        json.dumps(
            {
                "phase": 2,
                "same_client": same,
                "new_client": {"session": new_session, "call": new_call},
                "exchanges": exchanges,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    import anyio

    anyio.run(main)
