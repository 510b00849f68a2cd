#!/usr/bin/env python3
"""A small OAuth 2.1 authorization server for Portico's `[server.oauth]` interop test.

Just enough of one for an MCP client to get an access token without a person: RFC 8414 metadata,
a JWKS, dynamic client registration (RFC 7591), an authorization endpoint that redirects straight
back with a code (no login, no consent), and a token endpoint that checks PKCE (S256 only) and
issues RS256 JWTs whose `aud` is the `resource` the client asked for (RFC 8707). Not for anything
but tests: codes and clients live in memory, nobody logs in.

Usage:
  oauth_issuer.py [--port 0] [--host 127.0.0.1] [--path /tenant] [--grant SCOPE,...]
                  [--sub SUBJECT]

The issuer is http://HOST:PORT{--path} (default path /tenant, to exercise RFC 8414's
path-insertion rule). Once uvicorn serves, ONE line goes to stdout:
  ISSUER http://127.0.0.1:PORT/tenant
Routes (P = --path):
  GET  /.well-known/oauth-authorization-server{P}   metadata (RFC 8414 section 3)
  GET  {P}/jwks                                      the one RSA signing key
  POST {P}/register                                  dynamic client registration (public clients)
  GET  {P}/authorize                                 302 to redirect_uri?code=..&state=..&iss=..
  POST {P}/token                                     authorization_code + PKCE -> JWT
--grant: the scopes it grants (default all it is asked for); a token carries the requested scopes
that are in this list. --sub: the token's subject (default sdk-user).
Each refusal is a JSON OAuth error (400/401) and a line on stderr. SIGTERM stops it.
"""

import argparse
import asyncio
import base64
import hashlib
import secrets
import socket
import sys
import time
from urllib.parse import urlencode

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse
from starlette.routing import Route

KID = "py-rsa-1"


def log(message: str) -> None:
    sys.stderr.write(f"oauth_issuer: {message}\n")
    sys.stderr.flush()


def oauth_error(error: str, description: str, status: int = 400) -> JSONResponse:
    log(f"refused: {error}: {description}")
    return JSONResponse({"error": error, "error_description": description}, status_code=status)


def build_app(issuer: str, path: str, grant: list[str] | None, subject: str) -> Starlette:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    public_jwk.update({"kid": KID, "use": "sig", "alg": "RS256"})
    clients: dict[str, dict] = {}
    codes: dict[str, dict] = {}

    async def metadata(_: Request) -> JSONResponse:
        return JSONResponse(
            {
                "issuer": issuer,
                "authorization_endpoint": f"{issuer}/authorize",
                "token_endpoint": f"{issuer}/token",
                "registration_endpoint": f"{issuer}/register",
                "jwks_uri": f"{issuer}/jwks",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "authorization_response_iss_parameter_supported": True,
            }
        )

    async def jwks(_: Request) -> JSONResponse:
        return JSONResponse({"keys": [public_jwk]})

    async def register(request: Request) -> JSONResponse:
        body = await request.json()
        redirect_uris = body.get("redirect_uris")
        if not isinstance(redirect_uris, list) or not redirect_uris:
            return oauth_error("invalid_redirect_uri", "redirect_uris is required")
        client_id = "client-" + secrets.token_hex(8)
        record = {
            "client_id": client_id,
            "client_id_issued_at": int(time.time()),
            "redirect_uris": redirect_uris,
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
        }
        if body.get("client_name"):
            record["client_name"] = body["client_name"]
        clients[client_id] = record
        log(f"registered {client_id} for {redirect_uris}")
        return JSONResponse(record, status_code=201)

    async def authorize(request: Request):
        q = request.query_params
        client = clients.get(q.get("client_id", ""))
        if client is None:
            return oauth_error("invalid_client", "unknown client_id", 401)
        redirect_uri = q.get("redirect_uri")
        if redirect_uri not in client["redirect_uris"]:
            return oauth_error("invalid_request", "redirect_uri is not registered")
        if q.get("response_type") != "code":
            return oauth_error("unsupported_response_type", "only code")
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return oauth_error("invalid_request", "PKCE with S256 is required")
        if not q.get("resource"):
            return oauth_error("invalid_target", "resource (RFC 8707) is required")
        requested = (q.get("scope") or "").split()
        granted = [s for s in requested if grant is None or s in grant]
        code = secrets.token_urlsafe(24)
        codes[code] = {
            "client_id": client["client_id"],
            "redirect_uri": redirect_uri,
            "challenge": q["code_challenge"],
            "resource": q["resource"],
            "scope": " ".join(granted),
            "expires": time.time() + 60,
        }
        log(f"code for {client['client_id']}: resource {q['resource']}, requested {requested}, granted {granted}")
        sep = "&" if "?" in redirect_uri else "?"
        params = {"code": code, "iss": issuer}
        if q.get("state") is not None:
            params["state"] = q["state"]
        return RedirectResponse(f"{redirect_uri}{sep}{urlencode(params)}", status_code=302)

    async def token(request: Request) -> JSONResponse:
        form = await request.form()
        if form.get("grant_type") != "authorization_code":
            return oauth_error("unsupported_grant_type", "only authorization_code")
        entry = codes.pop(form.get("code", ""), None)
        if entry is None or entry["expires"] < time.time():
            return oauth_error("invalid_grant", "unknown, used or expired code")
        if form.get("client_id") != entry["client_id"]:
            return oauth_error("invalid_grant", "the code was issued to another client")
        if form.get("redirect_uri") != entry["redirect_uri"]:
            return oauth_error("invalid_grant", "redirect_uri differs from the authorization request's")
        verifier = form.get("code_verifier") or ""
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        if not secrets.compare_digest(digest, entry["challenge"]):
            return oauth_error("invalid_grant", "PKCE verification failed")
        resource = form.get("resource") or entry["resource"]
        if resource != entry["resource"]:
            return oauth_error("invalid_target", "resource differs from the authorization request's")
        now = int(time.time())
        claims = {
            "iss": issuer,
            "sub": subject,
            "aud": resource,
            "iat": now,
            "nbf": now,
            "exp": now + 300,
            "client_id": entry["client_id"],
            "scope": entry["scope"],
        }
        access_token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": KID})
        log(f"token for {entry['client_id']}: aud {resource}, scope {entry['scope']!r}")
        return JSONResponse(
            {
                "access_token": access_token,
                "token_type": "Bearer",
                "expires_in": 300,
                "scope": entry["scope"],
            },
            headers={"Cache-Control": "no-store"},
        )

    return Starlette(
        routes=[
            Route(f"/.well-known/oauth-authorization-server{path}", metadata),
            Route(f"{path}/jwks", jwks),
            Route(f"{path}/register", register, methods=["POST"]),
            Route(f"{path}/authorize", authorize),
            Route(f"{path}/token", token, methods=["POST"]),
        ]
    )


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--path", default="/tenant")
    ap.add_argument("--grant", default=None, help="comma-separated scopes it grants (default: any asked for)")
    ap.add_argument("--sub", default="sdk-user")
    args = ap.parse_args()
    if args.path and (not args.path.startswith("/") or args.path.endswith("/")):
        ap.error("--path starts with / and does not end with one")
    grant = [s for s in args.grant.split(",") if s] if args.grant is not None else None

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    port = sock.getsockname()[1]
    issuer = f"http://{args.host}:{port}{args.path}"

    app = build_app(issuer, args.path, grant, args.sub)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.01)
        sys.stdout.write(f"ISSUER {issuer}\n")
        sys.stdout.flush()

    announcer = asyncio.create_task(announce())
    await server.serve(sockets=[sock])
    announcer.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
