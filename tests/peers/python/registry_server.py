#!/usr/bin/env python3
"""A small MCP registry for tests: the read side of the registry API, v0.1, over the server.json
documents in tests/peers/registry/ (or --dir). Python stdlib only.

Usage:
  registry_server.py [--dir DIR] [--port 0] [--substitute OLD=NEW ...]

Binds 127.0.0.1 only. Once it serves, ONE line goes to stdout, the readiness signal:
  http://127.0.0.1:PORT
Routes (every answer is JSON):
  GET /v0.1/servers?search=S&limit=N&cursor=C&version=latest
        servers whose name contains S (any case), sorted by name then version; `version=latest`
        keeps each server's latest version only; pages of N (default 30, at most 100), the next
        page's cursor in `metadata.nextCursor`
  GET /v0.1/servers/{url-encoded name}/versions                 every version of one server
  GET /v0.1/servers/{url-encoded name}/versions/latest          its latest version
  GET /v0.1/servers/{url-encoded name}/versions/{version}       one version
Each server comes as the API has it: {"server": <server.json>, "_meta": {"io.modelcontextprotocol.
registry/official": {"status": "active", "isLatest": ..., "publishedAt": ..., "updatedAt": ...}}}.
Unknown servers and versions: 404 {"error": "Server not found"}; anything else 404
{"error": "Not found"}; a bad limit or cursor 400 {"error": ...}.

A server's latest version is its highest, comparing the numbers in the versions. --substitute
replaces a string in every document served (e.g. a remote's URL with a local test server's).
Each request is logged to stderr as "registry_server: GET PATH -> STATUS". SIGTERM stops it.
"""

import argparse
import base64
import json
import os
import re
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(HERE, "..", "registry")
PUBLISHED_AT = "2026-09-01T12:00:00Z"


def version_key(version: str):
    return [int(n) for n in re.findall(r"\d+", version)]


def load(directory: str, substitutions: list[tuple[str, str]]):
    """Every *.json document in the directory, by name, each name's versions newest first."""
    servers: dict[str, list[dict]] = {}
    for file in sorted(os.listdir(directory)):
        if not file.endswith(".json"):
            continue
        with open(os.path.join(directory, file), encoding="utf-8") as f:
            text = f.read()
        for old, new in substitutions:
            text = text.replace(old, new)
        document = json.loads(text)
        servers.setdefault(document["name"], []).append(document)
    for versions in servers.values():
        versions.sort(key=lambda d: version_key(d["version"]), reverse=True)
    return servers


def entry(document: dict, latest: bool) -> dict:
    return {
        "server": document,
        "_meta": {
            "io.modelcontextprotocol.registry/official": {
                "status": "active",
                "publishedAt": PUBLISHED_AT,
                "updatedAt": PUBLISHED_AT,
                "isLatest": latest,
            }
        },
    }


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def decode_cursor(cursor: str) -> int:
    text = base64.urlsafe_b64decode(cursor.encode()).decode()
    if not text.startswith("offset:"):
        raise ValueError(cursor)
    return int(text.removeprefix("offset:"))


def make_handler(servers: dict[str, list[dict]]):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            sys.stderr.write(f"registry_server: GET {self.path} -> {status}\n")
            sys.stderr.flush()

        def do_GET(self):
            parts = urlsplit(self.path)
            # Split before decoding: a name's `/` comes as %2F.
            segments = [unquote(s) for s in parts.path.split("/")[1:]]
            query = parse_qs(parts.query)
            if segments[:2] != ["v0.1", "servers"]:
                return self.answer(404, {"error": "Not found"})
            rest = segments[2:]
            if rest in ([], [""]):
                return self.list(query)
            name = rest[0]
            versions = servers.get(name)
            if len(rest) == 2 and rest[1] == "versions":
                if not versions:
                    return self.answer(404, {"error": "Server not found"})
                items = [entry(d, i == 0) for i, d in enumerate(versions)]
                return self.answer(200, {"servers": items, "metadata": {"count": len(items)}})
            if len(rest) == 3 and rest[1] == "versions":
                if not versions:
                    return self.answer(404, {"error": "Server not found"})
                wanted = rest[2]
                if wanted == "latest":
                    return self.answer(200, entry(versions[0], True))
                for i, document in enumerate(versions):
                    if document["version"] == wanted:
                        return self.answer(200, entry(document, i == 0))
                return self.answer(404, {"error": "Server not found"})
            return self.answer(404, {"error": "Not found"})

        def list(self, query):
            search = query.get("search", [""])[0].lower()
            try:
                limit = int(query.get("limit", ["30"])[0])
                offset = decode_cursor(query["cursor"][0]) if "cursor" in query else 0
            except (ValueError, UnicodeDecodeError):
                return self.answer(400, {"error": "invalid limit or cursor"})
            if not 1 <= limit <= 100:
                return self.answer(400, {"error": "limit must be between 1 and 100"})
            latest_only = query.get("version", [""])[0] == "latest"
            items = []
            for name in sorted(servers):
                if search not in name.lower():
                    continue
                for i, document in enumerate(servers[name]):
                    if i == 0 or not latest_only:
                        items.append(entry(document, i == 0))
            page = items[offset : offset + limit]
            metadata = {"count": len(page)}
            if offset + limit < len(items):
                metadata["nextCursor"] = encode_cursor(offset + limit)
            return self.answer(200, {"servers": page, "metadata": metadata})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default=DEFAULT_DIR)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--substitute", action="append", default=[])
    args = parser.parse_args()
    substitutions = [tuple(s.split("=", 1)) for s in args.substitute]
    servers = load(args.dir, substitutions)
    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(servers))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"http://127.0.0.1:{httpd.server_address[1]}", flush=True)
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()


if __name__ == "__main__":
    main()
