#!/usr/bin/env python3
"""Stdlib-only MCP smoke client for the test peers (no SDK, any Python 3.8+).

Does: handshake, tools/list, one tools/call, and prints what happened as JSON
lines on stdout ({"step": ..., ...}); exits non-zero if a step fails.

Transports:
  stdio:            smoke_client.py [options] -- COMMAND [ARGS...]
  streamable HTTP:  smoke_client.py [options] --http http://127.0.0.1:PORT/mcp
  legacy HTTP+SSE:  smoke_client.py [options] --sse  http://127.0.0.1:PORT/sse

Options:
  --protocol V      protocolVersion to propose (default 2025-11-25). With
                    2026-07-28 the client does NOT send initialize: it sends
                    server/discover and stamps the _meta envelope on every request.
  --discover        (handshake versions) first send server/discover and record the
                    answer, then initialize anyway
  --call NAME       tool to call (default: echo if listed, else the first tool)
  --args JSON       its arguments (default {"message": "hi"} for echo, else {})
  --timeout S       per-request timeout in seconds (default 10)
"""

from __future__ import annotations

import argparse
import http.client
import json
import queue
import subprocess
import sys
import threading
import time
import urllib.parse
from typing import Any, Optional

MODERN = "2026-07-28"
CLIENT_INFO = {"name": "portico-smoke-client", "version": "0.0.0"}


def emit(step: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"step": step, **fields}) + "\n")
    sys.stdout.flush()


class RpcFailure(Exception):
    pass


# ----------------------------------------------------------------- transports
class StdioTransport:
    def __init__(self, argv: list[str]):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.inbox: "queue.Queue[Any]" = queue.Queue()
        self.skipped = 0
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                self.skipped += 1
                continue
            if isinstance(msg, dict):
                self.inbox.put(msg)
            else:
                self.skipped += 1
        self.inbox.put(None)

    def send(self, msg: dict, headers: Optional[dict] = None) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def receive(self, msg_id: Any, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RpcFailure(f"timeout waiting for response id={msg_id}")
            try:
                msg = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            if msg is None:
                raise RpcFailure(f"server closed stdout (exit code {self.proc.wait()})")
            if msg.get("id") == msg_id and ("result" in msg or "error" in msg):
                return msg

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait(timeout=5)


def _read_sse_events(resp):
    """Yield (event, data) from an http.client response carrying text/event-stream."""
    event, data = "message", []
    while True:
        raw = resp.readline()
        if not raw:
            return
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)


class StreamableHttpTransport:
    def __init__(self, url: str, timeout: float):
        self.url = urllib.parse.urlsplit(url)
        self.timeout = timeout
        self.session_id: Optional[str] = None
        self.protocol_version: Optional[str] = None
        self.pending: dict = {}

    def _conn(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=self.timeout)

    def send(self, msg: dict, headers: Optional[dict] = None) -> None:
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        if self.protocol_version:
            h["MCP-Protocol-Version"] = self.protocol_version
        h.update(headers or {})
        conn = self._conn()
        conn.request("POST", self.url.path or "/", body=json.dumps(msg), headers=h)
        resp = conn.getresponse()
        sid = resp.getheader("Mcp-Session-Id")
        if sid:
            self.session_id = sid
        ctype = resp.getheader("Content-Type", "")
        if "id" not in msg or "method" not in msg:
            resp.read()
            conn.close()
            if resp.status >= 400:
                raise RpcFailure(f"HTTP {resp.status} for notification {msg.get('method')}")
            return
        if ctype.startswith("text/event-stream"):
            for _event, data in _read_sse_events(resp):
                if not data.strip():
                    continue  # 2025-11-25 priming event (id + empty data)
                reply = json.loads(data)
                if isinstance(reply, dict) and reply.get("id") == msg["id"] and ("result" in reply or "error" in reply):
                    self.pending[msg["id"]] = reply
                    break
        else:
            body = resp.read()
            try:
                reply = json.loads(body)
            except ValueError:
                raise RpcFailure(f"HTTP {resp.status}: {body[:200]!r}")
            self.pending[msg["id"]] = reply
        conn.close()

    def receive(self, msg_id: Any, timeout: float) -> dict:
        if msg_id not in self.pending:
            raise RpcFailure(f"no response for id={msg_id}")
        return self.pending.pop(msg_id)

    def close(self) -> None:
        if self.session_id:
            conn = self._conn()
            conn.request("DELETE", self.url.path or "/", headers={"Mcp-Session-Id": self.session_id})
            conn.getresponse().read()
            conn.close()


class LegacySseTransport:
    def __init__(self, url: str, timeout: float):
        self.url = urllib.parse.urlsplit(url)
        self.inbox: "queue.Queue[Any]" = queue.Queue()
        self.endpoint: "queue.Queue[str]" = queue.Queue()
        self.conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=timeout)
        self.conn.request("GET", self.url.path, headers={"Accept": "text/event-stream"})
        self.resp = self.conn.getresponse()
        if self.resp.status != 200:
            raise RpcFailure(f"GET {url} -> HTTP {self.resp.status}")
        threading.Thread(target=self._reader, daemon=True).start()
        self.post_path = self.endpoint.get(timeout=timeout)
        emit("sse-endpoint", path=self.post_path)

    def _reader(self) -> None:
        try:
            for event, data in _read_sse_events(self.resp):
                if event == "endpoint":
                    self.endpoint.put(data)
                else:
                    self.inbox.put(json.loads(data))
        except Exception:
            pass
        self.inbox.put(None)

    def send(self, msg: dict, headers: Optional[dict] = None) -> None:
        target = urllib.parse.urljoin(urllib.parse.urlunsplit(self.url), self.post_path)
        t = urllib.parse.urlsplit(target)
        conn = http.client.HTTPConnection(t.hostname, t.port, timeout=10)
        path = t.path + ("?" + t.query if t.query else "")
        conn.request("POST", path, body=json.dumps(msg), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        if resp.status >= 400:
            raise RpcFailure(f"POST {path} -> HTTP {resp.status}")

    receive = StdioTransport.receive

    def close(self) -> None:
        self.conn.close()


# ------------------------------------------------------------------- session
class Client:
    def __init__(self, transport, protocol: str, timeout: float):
        self.t = transport
        self.protocol = protocol
        self.timeout = timeout
        self.next_id = 1
        self.modern = protocol == MODERN

    def request(self, method: str, params: Optional[dict] = None, name: Optional[str] = None) -> dict:
        params = dict(params or {})
        headers: dict = {}
        if self.modern:
            meta = dict(params.get("_meta") or {})
            meta["io.modelcontextprotocol/protocolVersion"] = MODERN
            meta["io.modelcontextprotocol/clientInfo"] = CLIENT_INFO
            meta["io.modelcontextprotocol/clientCapabilities"] = {}
            params["_meta"] = meta
            headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
            if name is not None:
                headers["Mcp-Name"] = name
        msg_id = self.next_id
        self.next_id += 1
        self.t.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}, headers)
        return self.t.receive(msg_id, self.timeout)

    def notify(self, method: str) -> None:
        self.t.send({"jsonrpc": "2.0", "method": method})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--protocol", default="2025-11-25")
    p.add_argument("--discover", action="store_true")
    p.add_argument("--call")
    p.add_argument("--args")
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--http")
    p.add_argument("--sse")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command

    if a.http:
        transport: Any = StreamableHttpTransport(a.http, a.timeout)
    elif a.sse:
        transport = LegacySseTransport(a.sse, a.timeout)
    elif cmd:
        transport = StdioTransport(cmd)
    else:
        p.error("give --http URL, --sse URL or -- COMMAND")
    client = Client(transport, a.protocol, a.timeout)
    ok = True
    try:
        if client.modern or a.discover:
            saved = client.modern
            client.modern = True
            if isinstance(transport, StreamableHttpTransport):
                transport.protocol_version = MODERN
            r = client.request("server/discover")
            client.modern = saved
            if isinstance(transport, StreamableHttpTransport) and not saved:
                transport.protocol_version = None
            emit("server/discover", response=r)
            if client.modern and "error" in r:
                return 1
        if not client.modern:
            r = client.request(
                "initialize",
                {"protocolVersion": a.protocol, "capabilities": {}, "clientInfo": CLIENT_INFO},
            )
            emit("initialize", proposed=a.protocol, response=r)
            if "error" in r:
                return 1
            if isinstance(transport, StreamableHttpTransport):
                transport.protocol_version = r["result"]["protocolVersion"]
            client.notify("notifications/initialized")
        r = client.request("tools/list")
        tools = [t["name"] for t in r.get("result", {}).get("tools", [])]
        emit("tools/list", tools=tools, error=r.get("error"))
        if "error" in r:
            return 1
        name = a.call or ("echo" if "echo" in tools else (tools[0] if tools else None))
        if name:
            args = json.loads(a.args) if a.args else ({"message": "hi"} if name == "echo" else {})
            r = client.request("tools/call", {"name": name, "arguments": args}, name=name)
            emit("tools/call", name=name, response=r)
            ok = "result" in r and not r["result"].get("isError")
    except RpcFailure as e:
        emit("failure", error=str(e))
        ok = False
    finally:
        skipped = getattr(transport, "skipped", 0)
        if skipped:
            emit("skipped-non-json-lines", count=skipped)
        transport.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
