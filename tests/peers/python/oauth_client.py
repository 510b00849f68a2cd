#!/usr/bin/env python3
"""The Python SDK's own OAuth client against an MCP server that wants a token, for Portico's
`[server.oauth]` interop test. Run it with tests/peers/.venv/bin/python.

The SDK (`mcp.client.auth.OAuthClientProvider`, an httpx2 auth) does everything from the server's
first 401: reads `resource_metadata` and `scope` from `WWW-Authenticate`, fetches the protected
resource metadata, then the authorization server's metadata, registers a client dynamically,
authorizes with PKCE and exchanges the code for a token. The only part played here is the
person's: the redirect handler fetches the authorization URL without following its redirect (the
test's authorization server asks nobody anything) and hands the code, state and iss from its
Location to the callback handler.

Usage:
  oauth_client.py --url http://127.0.0.1:PORT/mcp [--call NAME] [--timeout SECONDS]

Output: one JSON object on stdout:
  {"tools": [sorted tool names], "call": {"name", "result"} (with --call),
   "token_scope": the scope the token was granted,
   "exchanges": ["METHOD PATH STATUS", ...] every HTTP exchange the SDK's client made, in order}
A failure: {"fatal": "..."} and exit 2.
"""

import argparse
import json
import sys
import traceback
from typing import Any
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

# Never served: the redirect handler reads the code from the Location header instead.
REDIRECT_URI = "http://127.0.0.1:9/callback"


class MemoryStorage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


async def run(ns: argparse.Namespace, out: dict[str, Any]) -> None:
    redirected: dict[str, str | None] = {}

    async def redirect_handler(authorization_url: str) -> None:
        async with httpx2.AsyncClient(follow_redirects=False, timeout=ns.timeout) as http:
            response = await http.get(authorization_url)
        if response.status_code not in (302, 303):
            raise RuntimeError(f"authorize answered {response.status_code}: {response.text}")
        query = parse_qs(urlparse(response.headers["location"]).query)
        for name in ("code", "state", "iss"):
            redirected[name] = query.get(name, [None])[0]

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(
            code=redirected["code"] or "", state=redirected.get("state"), iss=redirected.get("iss")
        )

    storage = MemoryStorage()
    auth = OAuthClientProvider(
        server_url=ns.url,
        client_metadata=OAuthClientMetadata(
            client_name="portico-oauth-interop",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )

    async def record(response: httpx2.Response) -> None:
        out["exchanges"].append(f"{response.request.method} {response.request.url.path} {response.status_code}")

    http_client = create_mcp_http_client(auth=auth)
    http_client.event_hooks = {"request": [], "response": [record]}
    async with http_client:
        async with Client(
            streamable_http_client(ns.url, http_client=http_client),
            read_timeout_seconds=ns.timeout,
        ) as client:
            listed = await client.list_tools()
            out["tools"] = sorted(tool.name for tool in listed.tools)
            if ns.call:
                result = await client.call_tool(ns.call, {})
                out["call"] = {
                    "name": ns.call,
                    "result": result.model_dump(by_alias=True, exclude_none=True, mode="json"),
                }
    out["token_scope"] = storage.tokens.scope if storage.tokens else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--call", default=None)
    ap.add_argument("--timeout", type=float, default=30)
    ns = ap.parse_args()
    out: dict[str, Any] = {"tools": None, "call": None, "token_scope": None, "exchanges": []}
    try:
        anyio.run(run, ns, out)
    except BaseException as e:  # noqa: BLE001
        traceback.print_exc(file=sys.stderr)
        out["fatal"] = f"{type(e).__name__}: {e}"
        print(json.dumps(out))
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
