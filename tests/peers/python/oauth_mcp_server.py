#!/usr/bin/env python3
"""An OAuth-protected MCP server for Portico's tests, with its own authorization server on the same
origin: what a hosted MCP server that requires login looks like, reduced to what the tests check.

Authorization server: RFC 8414 metadata, RFC 7591 dynamic registration (public clients), an
/authorize that approves at once (a 302 back to the redirect URI with `code`, `state` and RFC 9207
`iss`), and a /token that checks PKCE S256, the redirect URI and the RFC 8707 `resource`, and
issues opaque access tokens with refresh tokens. Resource server: RFC 9728 metadata and a
Streamable HTTP /mcp answering JSON, where every request needs a valid access token (401 with a
`WWW-Authenticate` challenge otherwise). Tools: `whoami` (which token, which scopes) and
`admin_action`, which needs scope `admin` (403 `insufficient_scope` otherwise).

Test controls: GET /stats (counts, and the tokens issued, so a test can look for them in logs),
POST /revoke (every access token issued so far stops working; refresh tokens still do).

Flags: --expires-in SECONDS (the access tokens' lifetime, default 3600; 0 makes every token
expired on arrival). Listens on 127.0.0.1 only, on a free port, and prints
`listening http://127.0.0.1:PORT` on stdout when ready. Standard library only.
"""

import argparse
import base64
import hashlib
import itertools
import json
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
COUNTER = itertools.count(1)
STATE = {
    "registrations": 0,
    "authorizations": 0,
    "code_exchanges": 0,
    "refreshes": 0,
    "mcp_refused": 0,
    "mcp_accepted": 0,
    "access_tokens": [],
    "refresh_tokens": [],
    "scopes_requested": [],
}
CLIENTS = {}  # client_id -> redirect_uris
CODES = {}  # code -> {client_id, challenge, redirect_uri, scope, resource}
ACCESS = {}  # access token -> {scope, n}
REFRESH = {}  # refresh token -> {client_id, scope}
REVOKED = set()


def b64url_sha256(text):
    digest = hashlib.sha256(text.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    @property
    def base(self):
        return self.server.base

    def send_json(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            self.send_json(200, {
                "resource": f"{self.base}/mcp",
                "authorization_servers": [self.base],
                "scopes_supported": ["tools:read"],
                "bearer_methods_supported": ["header"],
            })
        elif url.path == "/.well-known/oauth-authorization-server":
            self.send_json(200, {
                "issuer": self.base,
                "authorization_endpoint": f"{self.base}/authorize",
                "token_endpoint": f"{self.base}/token",
                "registration_endpoint": f"{self.base}/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "scopes_supported": ["tools:read", "admin"],
                "authorization_response_iss_parameter_supported": True,
            })
        elif url.path == "/authorize":
            self.authorize(dict(urllib.parse.parse_qsl(url.query)))
        elif url.path == "/stats":
            with LOCK:
                self.send_json(200, STATE)
        elif url.path == "/mcp":
            self.send_json(405, {"error": "no server-initiated stream here"})
        else:
            self.send_json(404, {"error": "not found"})

    def authorize(self, query):
        client_id = query.get("client_id")
        redirect_uri = query.get("redirect_uri", "")
        if client_id not in CLIENTS or redirect_uri not in CLIENTS[client_id]:
            self.send_json(400, {"error": "invalid_request", "error_description": "unknown client or redirect_uri"})
            return
        if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            self.send_json(400, {"error": "invalid_request", "error_description": "PKCE S256 required"})
            return
        if query.get("resource") != f"{self.base}/mcp":
            self.send_json(400, {"error": "invalid_target", "error_description": f"resource {query.get('resource')!r}"})
            return
        code = f"code-{next(COUNTER)}"
        with LOCK:
            STATE["authorizations"] += 1
            STATE["scopes_requested"].append(query.get("scope", ""))
            CODES[code] = {
                "client_id": client_id,
                "challenge": query["code_challenge"],
                "redirect_uri": redirect_uri,
                "scope": query.get("scope", ""),
            }
        params = {"code": code, "iss": self.base}
        if "state" in query:
            params["state"] = query["state"]
        self.send_response(302)
        self.send_header("Location", f"{redirect_uri}?{urllib.parse.urlencode(params)}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        url = urllib.parse.urlparse(self.path)
        if url.path == "/register":
            request = json.loads(self.body() or b"{}")
            client_id = f"client-{next(COUNTER)}"
            with LOCK:
                STATE["registrations"] += 1
                CLIENTS[client_id] = request.get("redirect_uris", [])
            self.send_json(201, {
                "client_id": client_id,
                "redirect_uris": CLIENTS[client_id],
                "token_endpoint_auth_method": "none",
                "client_name": request.get("client_name", ""),
            })
        elif url.path == "/token":
            self.token(dict(urllib.parse.parse_qsl(self.body().decode())))
        elif url.path == "/revoke":
            with LOCK:
                REVOKED.update(ACCESS)
            self.send_json(200, {"revoked": len(REVOKED)})
        elif url.path == "/mcp":
            self.mcp()
        else:
            self.send_json(404, {"error": "not found"})

    def issue(self, scope, client_id):
        n = next(COUNTER)
        access, refresh = f"at-{n}-secret", f"rt-{n}-secret"
        with LOCK:
            ACCESS[access] = {"scope": scope, "n": n}
            REFRESH[refresh] = {"client_id": client_id, "scope": scope}
            STATE["access_tokens"].append(access)
            STATE["refresh_tokens"].append(refresh)
        body = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.server.expires_in,
            "refresh_token": refresh,
        }
        if scope:
            body["scope"] = scope
        self.send_json(200, body)

    def token(self, form):
        grant = form.get("grant_type")
        if form.get("resource") != f"{self.base}/mcp":
            self.send_json(400, {"error": "invalid_target"})
            return
        if grant == "authorization_code":
            with LOCK:
                code = CODES.pop(form.get("code", ""), None)
            if (
                code is None
                or code["client_id"] != form.get("client_id")
                or code["redirect_uri"] != form.get("redirect_uri")
                or b64url_sha256(form.get("code_verifier", "")) != code["challenge"]
            ):
                self.send_json(400, {"error": "invalid_grant"})
                return
            with LOCK:
                STATE["code_exchanges"] += 1
            self.issue(code["scope"], code["client_id"])
        elif grant == "refresh_token":
            with LOCK:
                known = REFRESH.get(form.get("refresh_token", ""))
            if known is None or known["client_id"] != form.get("client_id"):
                self.send_json(400, {"error": "invalid_grant"})
                return
            with LOCK:
                STATE["refreshes"] += 1
            self.issue(known["scope"], known["client_id"])
        else:
            self.send_json(400, {"error": "unsupported_grant_type"})

    def challenge(self, status, scope="tools:read", error=None):
        header = (
            f'Bearer resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp", '
            f'scope="{scope}"'
        )
        if error:
            header += f', error="{error}"'
        with LOCK:
            STATE["mcp_refused"] += 1
        self.send_json(status, {"error": "unauthorized"}, {"WWW-Authenticate": header})

    def mcp(self):
        message = json.loads(self.body() or b"{}")
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        with LOCK:
            grant = ACCESS.get(token) if token not in REVOKED else None
        if grant is None:
            self.challenge(401, error="invalid_token" if token else None)
            return
        with LOCK:
            STATE["mcp_accepted"] += 1
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        scopes = grant["scope"].split()
        if method == "initialize":
            result = {
                "protocolVersion": message.get("params", {}).get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "oauth-mcp-peer", "version": "1.0.0"},
            }
        elif method == "tools/list":
            result = {"tools": [
                {"name": "whoami", "description": "Which token the call came with.",
                 "inputSchema": {"type": "object"}},
                {"name": "admin_action", "description": "Needs scope admin.",
                 "inputSchema": {"type": "object"}},
            ]}
        elif method == "tools/call":
            name = message.get("params", {}).get("name")
            if name == "admin_action" and "admin" not in scopes:
                self.challenge(403, scope="admin", error="insufficient_scope")
                return
            text = f"token #{grant['n']} with scopes [{' '.join(scopes)}]" if name == "whoami" else "admin done"
            result = {"content": [{"type": "text", "text": text}]}
        elif method == "ping":
            result = {}
        else:
            self.send_json(200, {"jsonrpc": "2.0", "id": request_id,
                                 "error": {"code": -32601, "message": f"method not found: {method}"}})
            return
        headers = {"Mcp-Session-Id": "oauth-peer-session"} if method == "initialize" else {}
        self.send_json(200, {"jsonrpc": "2.0", "id": request_id, "result": result}, headers)

    def do_DELETE(self):
        self.send_json(200, {})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--expires-in", type=int, default=3600)
    options = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.base = f"http://127.0.0.1:{server.server_address[1]}"
    server.expires_in = options.expires_in
    print(f"listening {server.base}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
