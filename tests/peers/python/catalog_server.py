#!/usr/bin/env python3
"""Catalog peer: a stdlib MCP server whose catalog is set on the command line.

Used to test naming (collisions, long and odd names), pagination, list_changed refresh, and version
negotiation with an old server.

Flags:
  --tools A,B,...       tool names (each answers the text "<name> called")
  --prompts N           N prompts named prompt_0..prompt_{N-1} (prompts/get answers "prompt <i>")
  --resources N         N resources mem://r/0..N-1 (text "resource <i>")
  --page-size N         paginate every list with nextCursor, N items a page (0 = no pagination)
  --only-version V      answer `initialize` with V whatever the client asks
  --dynamic             tool `add_tool {name}` adds a tool and sends notifications/tools/list_changed
  --sleep-tool          tool `sleep {seconds}` writes "sleep started" to stderr, sleeps, answers "slept"
  --big-tool            tool `big {bytes}` answers a text of that many "x"
  --description N=TEXT  tool N's description is TEXT instead of "The tool N" (repeatable): a
                        definition that changes between runs, for tool pinning

Every notifications/cancelled is logged to stderr as "cancelled request <id>".
"""

import argparse
import json
import sys

from _stdio_peer import RpcError, StdioPeer, text_result, INVALID_PARAMS

parser = argparse.ArgumentParser()
parser.add_argument("--tools", default="")
parser.add_argument("--prompts", type=int, default=0)
parser.add_argument("--resources", type=int, default=0)
parser.add_argument("--page-size", type=int, default=0)
parser.add_argument("--only-version", default=None)
parser.add_argument("--dynamic", action="store_true")
parser.add_argument("--sleep-tool", action="store_true")
parser.add_argument("--big-tool", action="store_true")
parser.add_argument("--description", action="append", default=[])
args = parser.parse_args()
descriptions = dict(item.split("=", 1) for item in args.description)


class CatalogPeer(StdioPeer):
    def handle_line(self, line):
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if isinstance(msg, dict) and msg.get("method") == "notifications/cancelled":
            request_id = (msg.get("params") or {}).get("requestId")
            sys.stderr.write(f"cancelled request {request_id}\n")
            sys.stderr.flush()
        super().handle_line(line)

    def page(self, items, params, key):
        if args.page_size <= 0:
            return {key: items}
        cursor = params.get("cursor")
        try:
            start = int(cursor) if cursor is not None else 0
        except ValueError:
            raise RpcError(INVALID_PARAMS, f"bad cursor {cursor!r}")
        chunk = items[start : start + args.page_size]
        result = {key: chunk}
        if start + args.page_size < len(items):
            result["nextCursor"] = str(start + args.page_size)
        return result

    def handle_request(self, method, params, msg_id):
        if method == "initialize":
            result = super().handle_request(method, params, msg_id)
            if args.only_version:
                result["protocolVersion"] = args.only_version
            caps = {"tools": {"listChanged": args.dynamic}}
            if args.prompts:
                caps["prompts"] = {"listChanged": False}
            if args.resources:
                caps["resources"] = {"listChanged": False}
            result["capabilities"] = caps
            return result
        if method == "tools/list":
            return self.page(self.tools, params, "tools")
        if method == "prompts/list":
            prompts = [{"name": f"prompt_{i}", "description": f"prompt {i}"} for i in range(args.prompts)]
            return self.page(prompts, params, "prompts")
        if method == "resources/list":
            resources = [{"uri": f"mem://r/{i}", "name": f"r{i}", "mimeType": "text/plain"} for i in range(args.resources)]
            return self.page(resources, params, "resources")
        if method == "prompts/get":
            name = params.get("name", "")
            if not name.startswith("prompt_") or not name[7:].isdigit() or int(name[7:]) >= args.prompts:
                raise RpcError(INVALID_PARAMS, f"unknown prompt {name}")
            return {"messages": [{"role": "user", "content": {"type": "text", "text": f"prompt {name[7:]}"}}]}
        if method == "resources/templates/list":
            return {"resourceTemplates": []}
        if method == "resources/read":
            uri = params.get("uri", "")
            if not uri.startswith("mem://r/"):
                raise RpcError(INVALID_PARAMS, f"unknown resource {uri}")
            return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": f"resource {uri[8:]}"}]}
        return super().handle_request(method, params, msg_id)


peer = CatalogPeer("catalog-peer")


def register(name):
    peer.tool(name, descriptions.get(name, f"The tool {name}"))(lambda arguments, msg_id: text_result(f"{name} called"))


for tool_name in filter(None, args.tools.split(",")):
    register(tool_name)

if args.dynamic:

    @peer.tool("add_tool", "Adds a tool and announces the change.", {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    def add_tool(arguments, msg_id):
        register(arguments["name"])
        peer.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return text_result(f"added {arguments['name']}")


if args.big_tool:

    @peer.tool("big", "Answers a text of the given size.", {"type": "object", "properties": {"bytes": {"type": "integer"}}})
    def big(arguments, msg_id):
        return text_result("x" * int(arguments.get("bytes", 0)))


if args.sleep_tool:
    import time

    @peer.tool("sleep", "Sleeps, then answers.", {"type": "object", "properties": {"seconds": {"type": "number"}}})
    def sleep(arguments, msg_id):
        sys.stderr.write("sleep started\n")
        sys.stderr.flush()
        time.sleep(float(arguments.get("seconds", 1)))
        return text_result("slept")


if __name__ == "__main__":
    peer.run()
