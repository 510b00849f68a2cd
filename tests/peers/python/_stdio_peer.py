"""Tiny stdlib-only MCP stdio server used by the fault fixtures.

Newline-delimited JSON-RPC 2.0 on stdin/stdout, nothing written to stdout
except replies (and whatever a fixture deliberately injects). Starts in a few
tens of milliseconds: imports only the standard library.

Behaviour shared by every fixture built on it:

* ``initialize``: answers with ``protocolVersion`` equal to the client's when
  it is one of ``HANDSHAKE_VERSIONS``, otherwise ``FALLBACK_VERSION``.
* ``server/discover``: JSON-RPC error -32601 (method not found), so clients
  that probe the 2026-07-28 protocol fall back to ``initialize``.
* ``notifications/*``: accepted silently (``notifications/initialized`` too).
* ``ping``: ``{}``.
* ``tools/list`` / ``tools/call``: from the fixture's tool table.
* Unknown request methods: -32601. Unknown tools: -32602.
* Lines that are not JSON: -32700 with ``id: null``. JSON that is not a
  request object (arrays, scalars): -32600 with ``id: null``.
* stdin EOF: ``on_eof`` (default: exit 0). SIGTERM: default action (exit).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, Callable, Optional

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
FALLBACK_VERSION = "2025-06-18"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

# Returned by a handler that wants the request to stay unanswered forever.
NO_REPLY = object()


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def text_result(text: str, is_error: bool = False) -> dict:
    result: dict = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


ToolHandler = Callable[[dict, Any], Any]


class StdioPeer:
    def __init__(self, name: str, version: str = "1.0.0") -> None:
        self.name = name
        self.version = version
        self.tools: list[dict] = []
        self.handlers: dict[str, ToolHandler] = {}
        # Methods that are read but never answered (e.g. a hung handshake).
        self.silent_methods: set[str] = set()
        # Called with the raw stdout binary stream before every reply.
        self.before_reply: Optional[Callable[[Any], None]] = None
        self.negotiated_version: Optional[str] = None
        self._out = sys.stdout.buffer
        self._lock = threading.Lock()

    # -- registration -----------------------------------------------------
    def tool(self, name: str, description: str, input_schema: Optional[dict] = None, **extra: Any):
        def register(fn: ToolHandler) -> ToolHandler:
            spec = {
                "name": name,
                "description": description,
                "inputSchema": input_schema or {"type": "object", "properties": {}},
            }
            spec.update(extra)
            self.tools.append(spec)
            self.handlers[name] = fn
            return fn

        return register

    # -- output -----------------------------------------------------------
    def write_raw(self, data: bytes) -> None:
        with self._lock:
            try:
                self._out.write(data)
                self._out.flush()
            except (BrokenPipeError, ValueError):
                os._exit(0)

    def send(self, message: dict) -> None:
        data = json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n"
        with self._lock:
            try:
                if self.before_reply is not None:
                    self.before_reply(self._out)
                self._out.write(data)
                self._out.flush()
            except (BrokenPipeError, ValueError):
                os._exit(0)

    def reply(self, msg_id: Any, result: dict) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def reply_error(self, msg_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.send({"jsonrpc": "2.0", "id": msg_id, "error": error})

    # -- dispatch ---------------------------------------------------------
    def handle_request(self, method: str, params: dict, msg_id: Any) -> Any:
        if method == "initialize":
            requested = params.get("protocolVersion")
            version = requested if requested in HANDSHAKE_VERSIONS else FALLBACK_VERSION
            self.negotiated_version = version
            return {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": self.name, "version": self.version},
            }
        if method == "server/discover":
            raise RpcError(METHOD_NOT_FOUND, "Method not found: server/discover")
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": self.tools}
        if method == "tools/call":
            name = params.get("name")
            handler = self.handlers.get(name) if isinstance(name, str) else None
            if handler is None:
                raise RpcError(INVALID_PARAMS, f"Unknown tool: {name!r}")
            arguments = params.get("arguments") or {}
            if not isinstance(arguments, dict):
                raise RpcError(INVALID_PARAMS, "arguments must be an object")
            return handler(arguments, msg_id)
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def handle_line(self, line: bytes) -> None:
        line = line.strip()
        if not line:
            return
        try:
            msg = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            self.reply_error(None, PARSE_ERROR, f"Parse error: {exc}")
            return
        if not isinstance(msg, dict):
            self.reply_error(None, INVALID_REQUEST, "Invalid Request: expected a JSON object")
            return
        method = msg.get("method")
        if not isinstance(method, str):
            # A response to something we never sent, or junk: ignore it.
            return
        params = msg.get("params")
        if not isinstance(params, dict):
            params = {}
        if "id" not in msg:
            return  # notification (notifications/initialized, cancelled, ...)
        msg_id = msg["id"]
        if method in self.silent_methods:
            return
        try:
            result = self.handle_request(method, params, msg_id)
        except RpcError as err:
            self.reply_error(msg_id, err.code, err.message, err.data)
            return
        except Exception as exc:  # a fixture bug: report it, keep serving
            self.reply_error(msg_id, -32603, f"Internal error: {exc!r}")
            return
        if result is NO_REPLY:
            return
        self.reply(msg_id, result)

    def on_eof(self) -> None:
        sys.exit(0)

    def run(self) -> None:
        stdin = sys.stdin.buffer
        while True:
            line = stdin.readline()
            if not line:
                break
            self.handle_line(line)
        self.on_eof()
