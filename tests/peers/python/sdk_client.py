#!/usr/bin/env python3
"""MCP client built on the official Python SDK (`mcp` 2.x `mcp.Client`), for Portico's tests.

Drives an MCP server (Portico's doors, or a test peer) through the SDK's own client
API, so the tests exercise Portico against the real SDK client rather than a
hand-rolled JSON-RPC one. Run it with tests/peers/.venv/bin/python.

Usage:
  sdk_client.py [options] --stdio -- CMD [ARGS...]        SDK stdio client (spawns CMD)
  sdk_client.py [options] --http URL [--header 'Name: value']...   Streamable HTTP client

Options:
  --era legacy|modern|auto  legacy: `initialize` handshake only (Client(mode="legacy"));
                            modern: 2026-07-28 only: server/discover, then every request in
                            the _meta envelope (no initialize, no fallback);
                            auto (default): the SDK's mode="auto" (discover, fall back to
                            initialize on any JSON-RPC error).
  --legacy-version V        protocolVersion the legacy handshake proposes (default: the
                            SDK's, 2025-11-25). The SDK has no option for this; it is done
                            by patching mcp.client.session.LATEST_HANDSHAKE_VERSION.
  --no-discover             with --era modern: skip server/discover and adopt 2026-07-28
                            directly (the SDK's Client(mode="2026-07-28") as is; then
                            server_info/instructions/capabilities are unknown).
  --list                    list tools, resources, resource templates, prompts (all pages),
                            before the actions below
  --call NAME [--args JSON] tools/call; --args (a JSON object, default {}) belongs to the
                            --call before it. Repeatable.
  --read URI                resources/read. Repeatable.
  --prompt NAME [--prompt-args JSON]   prompts/get. Repeatable.
                            --call/--read/--prompt run in command-line order.
  --subscribe URI           resources/subscribe (handshake era). Repeatable, in order
                            with --call/--read/--prompt.
  --unsubscribe URI         resources/unsubscribe (handshake era). Repeatable, likewise.
  --listen-resource URI     2026-07-28: open a subscriptions/listen stream for updates of URI
                            (repeatable: one stream naming them all) before the actions; its
                            honored filter is reported under "resource_listen"
  --wait-updates N          after the actions, wait up to --timeout until N
                            notifications/resources/updated have arrived; every one that
                            arrived is reported under "resource_updates" (their URIs, in
                            arrival order), also without this option
  --expect-list-changed     subscribe to tools list changes (2026-07-28: subscriptions/listen,
                            opened before the actions; handshake era: the
                            notifications/tools/list_changed notification), and after the
                            actions wait up to --timeout for one
  --list-after              after the actions (and the list_changed wait), list everything
                            again; reported under "after"
  --timeout SECONDS         per-request timeout (initialize included; the SDK bounds
                            server/discover at 10 s itself) and the list_changed wait (30)
  --exclude-unset           dump results with exclude_unset=True as well, i.e. only the
                            fields the server sent: without it the SDK's model defaults
                            show up (e.g. "resultType": "complete", "ttlMs": 0,
                            "cacheScope": "private" on handshake-era results)
  --elicit ANSWER            declare elicitation and answer every elicitation/create with
                            ANSWER: accept (content {"approve": true}), accept-no
                            (content {"approve": false}), decline or cancel; each request's
                            params are reported under "elicitations"
  --progress                ask for progress on each --call (a progress token); what arrives
                            is reported under the call's "progress" (progress, total, message)
  --sdk-default-env         stdio: give the child only the SDK's default environment
                            (HOME, LOGNAME, PATH, SHELL, TERM, USER); by default the
                            whole environment of this process is passed on

--list runs first, whatever its position; "list_changed_via" says how the change came
("subscriptions/listen" or "notification"); "listen" holds the honored filter (or the
error) of the 2026-07-28 subscription.

Output: one JSON object on stdout:
  {"protocol_version", "era" ("modern"|"legacy"), "server_info", "instructions",
   "server_capabilities", "tools" (names), "tools_full", "resources", "resource_templates",
   "prompts", "list_errors", "calls", "reads", "prompt_results", "list_changed",
   "list_changed_via", "listen", "after"}
The list fields are null unless --list was given. Each calls/reads/prompt_results
entry is {"name"|"uri": ..., "result": {...}} (model_dump by_alias, exclude_none) or
{"name"|"uri": ..., "error": {"code", "message", ["data"], ["exception"]}}. JSON-RPC
errors carry the server's code; the SDK itself raises -32001 "Request '<method>' timed
out" (no answer within --timeout) and -32000 "Connection closed" (transport gone; every
later request fails the same way); other client-side failures (e.g. structuredContent
that does not match the outputSchema) have code null and the exception type in
"exception". Exit 0, unless the
client could not connect at all: then {"fatal": "..."} and exit 2 (exit 64 on bad
usage). Diagnostics (and a stdio child's stderr) go to stderr.

SDK details this relies on (mcp 2.3.0): the Client's response cache is disabled
(cache=None) so every request reaches the server; `Client.call_tool` validates
structuredContent against the tool's outputSchema and sends tools/list itself when it
has not seen the tool yet; on 2026-07-28 a HEADER_MISMATCH answer makes it re-list
and resend once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from contextlib import AsyncExitStack
from typing import Any

MODERN_VERSION = "2026-07-28"
PAGE_CAP = 1000


def log(msg: str) -> None:
    print(f"sdk_client: {msg}", file=sys.stderr, flush=True)


def fatal(msg: str) -> None:
    print(json.dumps({"fatal": msg}), flush=True)
    sys.exit(2)


# ----------------------------------------------------------------- arguments
class _Call(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        ns.actions.append({"kind": "call", "name": value, "args": None})


class _Args(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        last = ns.actions[-1] if ns.actions else None
        if last is None or last["kind"] != "call" or last["args"] is not None:
            parser.error("--args must follow a --call (one --args per --call)")
        last["args"] = _json_object(parser, "--args", value)


class _Read(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        ns.actions.append({"kind": "read", "uri": value})


class _Subscribe(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        ns.actions.append({"kind": "subscribe", "uri": value})


class _Unsubscribe(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        ns.actions.append({"kind": "unsubscribe", "uri": value})


class _Prompt(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        ns.actions.append({"kind": "prompt", "name": value, "args": None})


class _PromptArgs(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        last = ns.actions[-1] if ns.actions else None
        if last is None or last["kind"] != "prompt" or last["args"] is not None:
            parser.error("--prompt-args must follow a --prompt (one --prompt-args per --prompt)")
        obj = _json_object(parser, "--prompt-args", value)
        bad = [k for k, v in obj.items() if not isinstance(v, str)]
        if bad:
            parser.error(f"--prompt-args values must be strings (not: {', '.join(bad)})")
        last["args"] = obj


def _json_object(parser: argparse.ArgumentParser, flag: str, text: str) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        parser.error(f"{flag}: invalid JSON: {e}")
    if not isinstance(obj, dict):
        parser.error(f"{flag}: must be a JSON object")
    return obj


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors: exit 64, no JSON
        self.print_usage(sys.stderr)
        print(f"sdk_client: error: {message}", file=sys.stderr)
        sys.exit(64)


def parse_args(argv: list[str]) -> argparse.Namespace:
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1 :]
    p = _Parser(prog="sdk_client.py", description="MCP client on the official Python SDK (see module doc).")
    t = p.add_mutually_exclusive_group(required=True)
    t.add_argument("--stdio", action="store_true", help="spawn the command after --")
    t.add_argument("--http", metavar="URL", help="Streamable HTTP endpoint")
    p.add_argument("--header", action="append", default=[], metavar="'Name: value'")
    p.add_argument("--era", choices=["legacy", "modern", "auto"], default="auto")
    p.add_argument("--legacy-version", metavar="V")
    p.add_argument("--no-discover", action="store_true")
    p.add_argument("--list", action="store_true")
    p.add_argument("--list-after", action="store_true")
    p.add_argument("--call", action=_Call, metavar="NAME")
    p.add_argument("--args", action=_Args, metavar="JSON")
    p.add_argument("--read", action=_Read, metavar="URI")
    p.add_argument("--subscribe", action=_Subscribe, metavar="URI")
    p.add_argument("--unsubscribe", action=_Unsubscribe, metavar="URI")
    p.add_argument("--wait-updates", type=int, default=0, metavar="N")
    p.add_argument("--listen-resource", action="append", default=[], metavar="URI")
    p.add_argument("--prompt", action=_Prompt, metavar="NAME")
    p.add_argument("--prompt-args", action=_PromptArgs, metavar="JSON")
    p.add_argument("--expect-list-changed", action="store_true")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--sdk-default-env", action="store_true")
    p.add_argument("--exclude-unset", action="store_true")
    p.add_argument("--elicit", choices=["accept", "accept-no", "decline", "cancel"])
    p.add_argument("--progress", action="store_true")
    p.set_defaults(actions=[])
    ns = p.parse_args(argv)
    ns.command = command
    if ns.stdio and not command:
        p.error("--stdio needs a command after --")
    if not ns.stdio and command:
        p.error("a command after -- is only for --stdio")
    if ns.stdio and ns.header:
        p.error("--header is only for --http")
    if ns.no_discover and ns.era != "modern":
        p.error("--no-discover is only for --era modern")
    if ns.legacy_version and ns.era == "modern":
        p.error("--legacy-version is not for --era modern")
    if ns.timeout <= 0:
        p.error("--timeout must be positive")
    headers: dict[str, str] = {}
    for h in ns.header:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            p.error(f"--header {h!r}: expected 'Name: value'")
        headers[name.strip()] = value.strip()
    ns.headers = headers
    return ns


# ----------------------------------------------------------------- helpers
EXCLUDE_UNSET = False


def dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, exclude_unset=EXCLUDE_UNSET, mode="json")


def error_entry(exc: BaseException) -> dict[str, Any]:
    from mcp.shared.exceptions import MCPError

    exc = unwrap(exc)
    if isinstance(exc, MCPError):
        err: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            err["data"] = exc.data
        return err
    return {"code": None, "message": str(exc) or type(exc).__name__, "exception": type(exc).__name__}


def unwrap(exc: BaseException) -> BaseException:
    """The first leaf of a (nested) exception group, else the exception itself."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    leaf = unwrap(exc)
    text = str(leaf)
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


async def list_all(fetch, field: str) -> list[Any]:
    """Every page of one list method (fetch(cursor) -> result with `field` and next_cursor)."""
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(PAGE_CAP):
        page = await fetch(cursor)
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if cursor is None:
            return items
        if cursor in seen:
            raise RuntimeError(f"pagination loop: cursor {cursor!r} repeated")
        seen.add(cursor)
    raise RuntimeError(f"more than {PAGE_CAP} pages")


async def list_everything(client) -> dict[str, Any]:
    out: dict[str, Any] = {"list_errors": {}}
    specs = [
        ("tools", "tools", client.list_tools),
        ("resources", "resources", client.list_resources),
        ("resource_templates", "resource_templates", client.list_resource_templates),
        ("prompts", "prompts", client.list_prompts),
    ]
    for key, field, method in specs:

        async def fetch(cursor, method=method):
            return await method(cursor=cursor)

        try:
            items = await list_all(fetch, field)
        except Exception as e:  # noqa: BLE001 - reported in the JSON
            log(f"{key}: {describe(e)}")
            out["list_errors"][key] = error_entry(e)
            items = []
        if key == "tools":
            out["tools"] = [t.name for t in items]
            out["tools_full"] = [dump(t) for t in items]
        else:
            out[key] = [dump(x) for x in items]
    return out


# ----------------------------------------------------------------- main
async def run(ns: argparse.Namespace, out: dict[str, Any], connected: list[bool]) -> None:
    import anyio
    import mcp
    import mcp.client.session as sdk_session
    import mcp_types as types
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

    if ns.legacy_version:
        if ns.legacy_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            log(f"--legacy-version {ns.legacy_version} is not a handshake version the SDK knows; sending it anyway")
        # ClientSession.initialize() proposes this module global; there is no parameter for it.
        sdk_session.LATEST_HANDSHAKE_VERSION = ns.legacy_version

    list_changed = anyio.Event()
    via: set[str] = set()
    updated = anyio.Event()

    async def message_handler(message: Any) -> None:
        if isinstance(message, Exception):
            log(f"transport fault: {describe(message)}")
            return
        method = getattr(message, "method", None)
        if method == "notifications/tools/list_changed":
            # On 2026-07-28 the SDK also tees subscriptions/listen events here.
            via.add("notification")
            list_changed.set()
        elif method == "notifications/resources/updated":
            if ns.listen_resource:
                return  # the SDK tees the stream's events here too; the stream's watcher counts them
            out["resource_updates"].append(str(message.params.uri))
            if len(out["resource_updates"]) >= ns.wait_updates:
                updated.set()
        elif method is not None:
            log(f"notification {method}")

    mode = {"legacy": "legacy", "auto": "auto", "modern": MODERN_VERSION}[ns.era]
    version = getattr(mcp, "__version__", None)
    if version is None:
        from importlib.metadata import version as _v

        version = _v("mcp")
    common = dict(
        mode=mode,
        read_timeout_seconds=ns.timeout,
        message_handler=message_handler,
        client_info=types.Implementation(name="portico-sdk-client", version=version),
        cache=None,
    )
    if ns.elicit:

        async def answer_elicitation(context, params):
            out["elicitations"].append(params.model_dump(by_alias=True, exclude_none=True))
            if ns.elicit == "accept":
                return types.ElicitResult(action="accept", content={"approve": True})
            if ns.elicit == "accept-no":
                return types.ElicitResult(action="accept", content={"approve": False})
            return types.ElicitResult(action=ns.elicit)

        common["elicitation_callback"] = answer_elicitation

    async with AsyncExitStack() as stack:
        if ns.stdio:
            env = dict(os.environ) if not ns.sdk_default_env else None
            server: Any = StdioServerParameters(command=ns.command[0], args=ns.command[1:], env=env)
        else:
            http_client = create_mcp_http_client(headers=ns.headers or None)
            await stack.enter_async_context(http_client)
            server = streamable_http_client(ns.http, http_client=http_client)
        client = Client(server, **common)

        # ---- connect (failure here is the only fatal case). No anyio.fail_after around it:
        # the client's task groups outlive this block. initialize is bounded by
        # read_timeout_seconds, server/discover by the SDK's own 10 s.
        try:
            await stack.enter_async_context(client)
            if ns.era == "modern" and not ns.no_discover:
                # Client(mode="2026-07-28") adopts a synthesized DiscoverResult without any
                # wire traffic; probe for real and adopt the server's answer.
                raw = await client.session.send_discover(MODERN_VERSION)
                client.session.adopt(types.DiscoverResult.model_validate(raw))
        except Exception as e:  # noqa: BLE001
            raise ConnectFailed(describe(e)) from e
        connected[0] = True

        pv = client.protocol_version
        out["protocol_version"] = pv
        out["era"] = "modern" if pv in MODERN_PROTOCOL_VERSIONS else "legacy"
        out["server_info"] = dump(client.server_info) if client.server_info is not None else None
        out["instructions"] = client.instructions
        out["server_capabilities"] = dump(client.server_capabilities)
        log(f"connected: protocol {pv}, server {out['server_info']}")

        # ---- list_changed: open the subscription before anything can change
        if ns.expect_list_changed and out["era"] == "modern":
            try:
                # Entering waits for the acknowledgment, bounded by read_timeout_seconds.
                sub = await stack.enter_async_context(client.listen(tools_list_changed=True))
                out["listen"] = {"honored": dump(sub.honored)}
                if not sub.honored.tools_list_changed:
                    log("subscriptions/listen: the server did not honor toolsListChanged")

                async def watch() -> None:
                    try:
                        async for event in sub:
                            log(f"subscriptions/listen event: {type(event).__name__}")
                            if isinstance(event, ToolsListChanged):
                                via.add("subscriptions/listen")
                                list_changed.set()
                    except Exception as e:  # noqa: BLE001
                        log(f"subscriptions/listen ended: {describe(e)}")
                        out["listen"]["lost"] = error_entry(e)

                tg = await stack.enter_async_context(anyio.create_task_group())
                # Cancel the watcher before the subscription and the client close (LIFO).
                stack.callback(tg.cancel_scope.cancel)
                tg.start_soon(watch)
            except Exception as e:  # noqa: BLE001
                log(f"subscriptions/listen failed: {describe(e)}")
                out["listen"] = {"error": error_entry(e)}

        # ---- resource updates on a stream of their own
        if ns.listen_resource and out["era"] == "modern":
            try:
                rsub = await stack.enter_async_context(client.listen(resource_subscriptions=ns.listen_resource))
                out["resource_listen"] = {"honored": dump(rsub.honored)}

                async def watch_resources() -> None:
                    try:
                        async for event in rsub:
                            if isinstance(event, ResourceUpdated):
                                out["resource_updates"].append(str(event.uri))
                                if len(out["resource_updates"]) >= ns.wait_updates:
                                    updated.set()
                    except Exception as e:  # noqa: BLE001
                        out["resource_listen"]["lost"] = error_entry(e)

                rtg = await stack.enter_async_context(anyio.create_task_group())
                stack.callback(rtg.cancel_scope.cancel)
                rtg.start_soon(watch_resources)
            except Exception as e:  # noqa: BLE001
                log(f"subscriptions/listen for resources failed: {describe(e)}")
                out["resource_listen"] = {"error": error_entry(e)}

        # ---- lists
        if ns.list:
            out.update(await list_everything(client))

        # ---- actions, in command-line order
        for action in ns.actions:
            kind = action["kind"]
            try:
                if kind == "call":
                    entry: dict[str, Any] = {"name": action["name"]}
                    progress: list[dict[str, Any]] = []

                    async def on_progress(done: float, total: float | None, message: str | None) -> None:
                        progress.append({"progress": done, "total": total, "message": message})

                    res = await client.call_tool(
                        action["name"],
                        action["args"] or {},
                        progress_callback=on_progress if ns.progress else None,
                    )
                    entry["result"] = dump(res)
                    if ns.progress:
                        entry["progress"] = progress
                    out["calls"].append(entry)
                elif kind in ("subscribe", "unsubscribe"):
                    entry = {"uri": action["uri"]}
                    if kind == "subscribe":
                        await client.subscribe_resource(action["uri"])
                    else:
                        await client.unsubscribe_resource(action["uri"])
                    entry["result"] = "ok"
                    out["subscriptions"].append({"kind": kind, **entry})
                elif kind == "read":
                    entry = {"uri": action["uri"]}
                    res = await client.read_resource(action["uri"])
                    entry["result"] = dump(res)
                    out["reads"].append(entry)
                else:
                    entry = {"name": action["name"]}
                    res = await client.get_prompt(action["name"], action["args"])
                    entry["result"] = dump(res)
                    out["prompt_results"].append(entry)
            except Exception as e:  # noqa: BLE001 - JSON-RPC and SDK errors go into the JSON
                log(f"{kind} {action.get('name') or action.get('uri')}: {describe(e)}")
                if os.environ.get("SDK_CLIENT_TRACEBACK"):
                    traceback.print_exc()
                entry["error"] = error_entry(e)
                if kind in ("subscribe", "unsubscribe"):
                    out["subscriptions"].append({"kind": kind, **entry})
                else:
                    {"call": out["calls"], "read": out["reads"], "prompt": out["prompt_results"]}[kind].append(entry)

        # ---- wait for resource updates
        if ns.wait_updates > 0:
            with anyio.move_on_after(ns.timeout):
                await updated.wait()
            if not updated.is_set():
                log(f"{len(out['resource_updates'])} of {ns.wait_updates} resource updates within {ns.timeout:g} s")

        # ---- wait for list_changed
        if ns.expect_list_changed:
            with anyio.move_on_after(ns.timeout):
                await list_changed.wait()
            out["list_changed"] = list_changed.is_set()
            out["list_changed_via"] = (
                "subscriptions/listen" if "subscriptions/listen" in via else "notification" if via else None
            )
            if not list_changed.is_set():
                log(f"no tools list_changed within {ns.timeout:g} s")

        if ns.list_after:
            out["after"] = await list_everything(client)


class ConnectFailed(Exception):
    pass


def main() -> None:
    global EXCLUDE_UNSET
    ns = parse_args(sys.argv[1:])
    EXCLUDE_UNSET = ns.exclude_unset
    import anyio

    out: dict[str, Any] = {
        "protocol_version": None,
        "era": None,
        "server_info": None,
        "instructions": None,
        "server_capabilities": None,
        "tools": None,
        "tools_full": None,
        "resources": None,
        "resource_templates": None,
        "prompts": None,
        "list_errors": None,
        "calls": [],
        "elicitations": [],
        "reads": [],
        "prompt_results": [],
        "subscriptions": [],
        "resource_updates": [],
        "resource_listen": None,
        "list_changed": False,
        "list_changed_via": None,
        "listen": None,
        "after": None,
    }
    connected = [False]
    try:
        anyio.run(run, ns, out, connected)
    except BaseException as e:  # noqa: BLE001
        leaf = unwrap(e)
        if isinstance(leaf, KeyboardInterrupt):
            raise
        if not connected[0]:
            if not isinstance(leaf, ConnectFailed) or os.environ.get("SDK_CLIENT_TRACEBACK"):
                traceback.print_exc()
            fatal(f"could not connect: {describe(leaf.__cause__ or leaf) if isinstance(leaf, ConnectFailed) else describe(leaf)}")
        # Connected, then something outside the per-action handling failed (e.g. the
        # teardown): keep what was gathered, say what went wrong, still exit 0.
        traceback.print_exc()
        out["client_error"] = describe(leaf)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
