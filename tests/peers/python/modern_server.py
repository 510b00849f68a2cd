#!/usr/bin/env python3
"""Modern MCP fixture built on the official Python SDK (mcp 2.x, MCPServer).

Speaks both protocol eras, on stdio and on Streamable HTTP:
  * 2026-07-28: every request carries the `_meta` envelope
    (io.modelcontextprotocol/protocolVersion + .../clientCapabilities),
    `server/discover` answers with supportedVersions ["2026-07-28"], no
    `initialize`.
  * handshake era: `initialize` with 2024-11-05 .. 2025-11-25 works as usual.
On stdio the first request decides the era of the connection; over HTTP each
POST is routed by its MCP-Protocol-Version header.

Usage:
  modern_server.py                       stdio (default)
  modern_server.py --http PORT           Streamable HTTP on http://127.0.0.1:PORT/mcp
        [--host 127.0.0.1] [--stateless] [--json-response]
  PORT 0 picks a free port. When HTTP is ready one line goes to stderr:
    modern_server: listening on http://127.0.0.1:PORT/mcp
  On stdio one line "modern_server: ready (stdio)" goes to stderr at start.

Tools:      echo(message) -> "echo: ..."; add(a, b) -> structured {"sum": a+b}
            (with outputSchema); delete_item(id) with title + annotations;
            touch(uri): a notifications/resources/updated for uri (listed or not);
            in_region(region), whose argument has an x-mcp-header annotation.
Resources:  fixture://greeting (text/plain); template fixture://items/{id}.
Prompts:    greet(name).
"""

from __future__ import annotations

import argparse
import socket
import sys

import anyio
from typing import Annotated

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

SERVER_NAME = "portico-modern-fixture"
GREETING = "Hello from the Portico modern fixture!"

server = MCPServer(
    name=SERVER_NAME,
    title="Portico modern fixture",
    version="1.0.0",
    instructions="Test fixture for Portico: echo, add, delete_item; fixture:// resources; greet prompt.",
    log_level="WARNING",
)


@server.tool(description="Echoes the message back as 'echo: <message>'.", structured_output=False)
def echo(message: str) -> str:
    return f"echo: {message}"


class Sum(BaseModel):
    sum: int


@server.tool(
    description="Registers a new tool <name> (answering '<name> called') and announces the change to listeners.",
    structured_output=False,
)
async def add_tool(name: str, ctx: Context) -> str:
    def added() -> str:
        return f"{name} called"

    server.add_tool(added, name=name, description=f"Added at run time: {name}", structured_output=False)
    await ctx.notify_tools_changed()
    return f"added {name}"


@server.tool(
    description="Announces that the resource <uri> changed (notifications/resources/updated to the "
    "subscriptions/listen streams that asked for it); the URI need not be listed.",
    structured_output=False,
)
async def touch(uri: str, ctx: Context) -> str:
    await ctx.notify_resource_updated(uri)
    return f"touched {uri}"


@server.tool(
    description="Answers 'region <region>'; its region argument is mirrored in the Mcp-Param-Region "
    "header (x-mcp-header, SEP-2243), which HTTP servers check against the body.",
    structured_output=False,
)
def in_region(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    return f"region {region}"


class Favourite(BaseModel):
    colour: str


def ask_colour() -> Elicit[Favourite]:
    return Elicit("What is your favourite colour?", Favourite)


@server.tool(
    description="Asks the user for their favourite colour (elicitation: a standalone request up to "
    "2025-11-25, an input_required round from 2026-07-28 on) and answers 'you like <colour>'.",
    structured_output=False,
)
def favourite_colour(favourite: Annotated[Favourite, Resolve(ask_colour)]) -> str:
    return f"you like {favourite.colour}"


@server.tool(description="Adds two integers; structured output {sum}.")
def add(a: int, b: int) -> Sum:
    return Sum(sum=a + b)


@server.tool(
    title="Delete an item (pretend)",
    description="Pretends to delete the item with the given id; nothing is stored.",
    annotations=ToolAnnotations(
        title="Delete an item (pretend)",
        readOnlyHint=False,
        destructiveHint=True,
        idempotentHint=True,
        openWorldHint=False,
    ),
    structured_output=False,
)
def delete_item(id: str) -> str:
    return f"deleted item {id}"


@server.resource("fixture://greeting", name="greeting", title="Greeting", mime_type="text/plain",
                 description="A fixed greeting text.")
def greeting() -> str:
    return GREETING


@server.resource("fixture://items/{id}", name="item", title="Item", mime_type="text/plain",
                 description="An item addressed by id.")
def item(id: str) -> str:
    return f"item {id}"


@server.prompt(title="Greet someone", description="Asks the model to greet a person by name.")
def greet(name: str) -> str:
    return f"Please greet {name} warmly."


async def serve_http(host: str, port: int, stateless: bool, json_response: bool) -> None:
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    bound_port = sock.getsockname()[1]

    app = server.streamable_http_app(stateless_http=stateless, json_response=json_response, host=host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)

    async with anyio.create_task_group() as tg:

        async def announce() -> None:
            while not uv.started:
                if uv.should_exit:
                    return
                await anyio.sleep(0.01)
            shown = f"[{host}]" if family == socket.AF_INET6 else host
            sys.stderr.write(f"modern_server: listening on http://{shown}:{bound_port}/mcp\n")
            sys.stderr.flush()

        tg.start_soon(announce)
        await uv.serve(sockets=[sock])
        tg.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on PORT (0 = any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address for --http (default 127.0.0.1)")
    parser.add_argument("--stateless", action="store_true", help="stateless Streamable HTTP (no Mcp-Session-Id)")
    parser.add_argument("--json-response", action="store_true", help="answer POSTs with JSON instead of SSE")
    args = parser.parse_args()

    if args.http is None:
        sys.stderr.write("modern_server: ready (stdio)\n")
        sys.stderr.flush()
        server.run("stdio")
    else:
        anyio.run(serve_http, args.host, args.http, args.stateless, args.json_response)


if __name__ == "__main__":
    main()
