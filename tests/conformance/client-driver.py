#!/usr/bin/env python3
"""Portico as the client under test in the MCP conformance suite's client scenarios.

`conformance client --command "client-driver.py" --scenario NAME` starts the scenario's own server
and runs this script with the server's URL as the last argument, the scenario's name in
MCP_CONFORMANCE_SCENARIO and, for some scenarios, the tool calls to make in MCP_CONFORMANCE_CONTEXT.

The script writes a Portico config with one unprefixed Streamable HTTP upstream at that URL (no era
pin: Portico negotiates as it would in production), starts the real `portico mcp --standalone` on
its stdio and, as that door's client, does what the scenario asks: lists the tools, calls them,
answers what the upstream asks during a call (elicitation accepted with nothing filled in, so the
schema's defaults are Portico's to apply; sampling and roots answered plainly), echoes a JSON Schema.
Everything the scenario server sees therefore comes from Portico's MCP client edge.

For the `auth/*` scenarios the upstream gets an `[mcp_servers.oauth]` table (the suite's Client ID
Metadata Document URL; a pre-registered client when the scenario's context has one), and the login
is Portico's own: `portico auth login scenario` first, then `portico mcp --standalone`, both with
`$BROWSER` set to tests/conformance/browser-follow.py, which follows the authorization server's
redirect back to Portico's loopback listener as a user's browser would. Step-up and re-authorization
later in the session are Portico's to start (the table's `open_browser = true` lets it).

With CLIENT_DRIVER_MODE=call (or call-daemon), a non-auth scenario is driven with `portico call`
as the client instead, as a script would use it: `portico tools --json` lists what Portico offers
of the upstream, then one `portico call TOOL --args JSON --json --elicit defaults` per tool the
scenario asks to be called, with the arguments it asks for (questions the tool asks are answered
from the form's defaults, SEP-1034, which is what the scenarios that ask expect). `call` runs each
command standalone (the call in the command's own process); `call-daemon` starts `portico serve`
first and each command goes through the daemon's `/mcp`, as `portico call` does when a daemon runs.

Standard library only. Environment: PORTICO_BIN (the binary; required), CLIENT_DRIVER_TIMEOUT
(seconds for one answer from Portico, default 20), CLIENT_DRIVER_LOG (a file to append this
script's and Portico's stderr to, instead of stderr), CLIENT_DRIVER_MODE (door, the default; call;
call-daemon). Exits non-zero when a step fails, saying which.
"""

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading

SCENARIO = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
AUTH = SCENARIO.startswith("auth/")
# The URL the suite's authorization servers accept as a Client ID Metadata Document.
CIMD_URL = "https://conformance-test.local/client-metadata.json"
BROWSER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser-follow.py")
CLIENT_SECRET_VAR = "CONFORMANCE_CLIENT_SECRET"
CONTEXT = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
TIMEOUT = float(os.environ.get("CLIENT_DRIVER_TIMEOUT", "20"))
MODE = os.environ.get("CLIENT_DRIVER_MODE", "door")
LOG = open(os.environ["CLIENT_DRIVER_LOG"], "a") if os.environ.get("CLIENT_DRIVER_LOG") else sys.stderr


def note(message):
    print(f"client-driver[{SCENARIO}]: {message}", file=LOG, flush=True)


def portico_config(url):
    return f"""[server]
rate_limit = {{ enabled = false }}
# For call-daemon: the daemon on a free loopback port.
listen = "127.0.0.1:0"

# Only the scenario's tools are listed, under their own names.
[builtins]
enabled = false

[expose]
prefix = false

[[mcp_servers]]
name = "scenario"
# The scenario servers listen on localhost.
allow_private_network = true
timeout_secs = 20
[mcp_servers.transport]
type = "http"
url = {json.dumps(url)}
{oauth_table()}"""


def oauth_table():
    if not AUTH:
        return ""
    # open_browser: step-ups and re-authorizations later in the session are Portico's to start.
    lines = [
        "[mcp_servers.oauth]",
        f"client_metadata_url = {json.dumps(CIMD_URL)}",
        "open_browser = true",
    ]
    if CONTEXT.get("client_id"):
        lines.append(f"client_id = {json.dumps(CONTEXT['client_id'])}")
    if CONTEXT.get("client_secret"):
        lines.append(f'client_secret_env = "{CLIENT_SECRET_VAR}"')
    return "\n".join(lines) + "\n"


def portico_env(home):
    env = {**os.environ, "PORTICO_HOME": home}
    if AUTH:
        env["BROWSER"] = BROWSER
        if CONTEXT.get("client_secret"):
            env[CLIENT_SECRET_VAR] = CONTEXT["client_secret"]
    return env


def login(binary, home):
    """`portico auth login scenario`, as a user would run it before starting their IDE."""
    config = os.path.join(home, "config.toml")
    outcome = subprocess.run(
        [binary, "auth", "login", "scenario", "--config", config],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=portico_env(home),
        timeout=TIMEOUT * 3,
    )
    note(f"auth login exited {outcome.returncode}: {outcome.stdout.strip()} {outcome.stderr.strip()}")


class Door:
    """`portico mcp --standalone` on a pipe, spoken to in newline-delimited JSON-RPC."""

    def __init__(self, binary, home):
        config = os.path.join(home, "config.toml")
        self.child = subprocess.Popen(
            [binary, "mcp", "--standalone", "--config", config],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=LOG,
            env=portico_env(home),
        )
        self.incoming = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.child.stdout:
            line = line.strip()
            if line:
                self.incoming.put(json.loads(line))
        self.incoming.put(None)

    def send(self, message):
        self.child.stdin.write(json.dumps(message).encode() + b"\n")
        self.child.stdin.flush()

    def notify(self, method, params=None):
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def request(self, method, params):
        """Sends a request and answers whatever Portico asks meanwhile, until the response arrives."""
        self.next_id += 1
        request_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            try:
                message = self.incoming.get(timeout=TIMEOUT)
            except queue.Empty:
                raise SystemExit(f"no answer to {method} within {TIMEOUT}s")
            if message is None:
                raise SystemExit(f"portico exited before answering {method}")
            if "method" in message and "id" in message:
                self.send(answer_request(message))
            elif "method" in message:
                continue  # notifications: progress, logs, list changes
            elif message.get("id") == request_id:
                if "error" in message:
                    raise SystemExit(f"{method} failed: {json.dumps(message['error'])}")
                return message["result"]

    def close(self):
        self.child.stdin.close()
        try:
            self.child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()


def answer_request(message):
    """What this client answers a request Portico relays from the upstream."""
    method = message["method"]
    if method == "elicitation/create":
        # Accept with nothing filled in: the defaults the requested schema declares are applied
        # by Portico before the answer reaches the upstream.
        result = {"action": "accept", "content": {}}
    elif method == "sampling/createMessage":
        result = {
            "role": "assistant",
            "content": {"type": "text", "text": "sampled by the conformance driver"},
            "model": "conformance-driver",
            "stopReason": "endTurn",
        }
    elif method == "roots/list":
        result = {"roots": []}
    elif method == "ping":
        result = {}
    else:
        return {
            "jsonrpc": "2.0",
            "id": message["id"],
            "error": {"code": -32601, "message": f"the driver does not answer {method}"},
        }
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def arguments_for(tool, tools):
    """The arguments the scenario expects for one of its tools, or None to leave it uncalled."""
    name = tool["name"]
    if name == "add_numbers":
        return {"a": 2, "b": 3}
    if name == "valid_tool":
        return {"region": "us-west1"}
    if name == "lookup_user":
        # Validating these arguments must not fetch the schema's network `$ref`.
        return {"id": "user-1"}
    if name == "json_schema_echo":
        focal = next((t for t in tools if t["name"] == "json_schema_2020_12_tool"), None)
        if focal is None:
            raise SystemExit("json_schema_2020_12_tool is not in Portico's tool list")
        return {"schema": focal["inputSchema"]}
    if name == "json_schema_2020_12_tool":
        return None  # its schema is what gets echoed; calling it is not asked for
    return {}


def run(door):
    door.request(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}, "sampling": {}, "roots": {}},
            "clientInfo": {"name": "portico-conformance-client-driver", "version": "1.0.0"},
        },
    )
    door.notify("notifications/initialized")
    tools = door.request("tools/list", {})["tools"]
    note(f"portico lists {[t['name'] for t in tools]}")

    calls = CONTEXT.get("toolCalls")
    if calls is None:
        # Every tool Portico lists, in the upstream's order: a tool Portico refuses (an invalid
        # x-mcp-header declaration) is not listed, so it is never called.
        calls = []
        for tool in tools:
            arguments = arguments_for(tool, tools)
            if arguments is not None:
                calls.append({"name": tool["name"], "arguments": arguments})
    for call in calls:
        # Sent as the scenario gives them, `null`s included (http-custom-headers passes
        # `verbose: null` to mean "not provided", which Portico reads so).
        result = door.request("tools/call", call)
        note(f"{call['name']}: {json.dumps(result)[:300]}")

    if SCENARIO == "http-standard-headers":
        for resource in door.request("resources/list", {})["resources"]:
            door.request("resources/read", {"uri": resource["uri"]})
        for prompt in door.request("prompts/list", {})["prompts"]:
            door.request("prompts/get", {"name": prompt["name"]})


def portico_command(binary, home, args):
    """`portico ARGS` (standalone in mode `call`) to its end; its stdout, or the step fails."""
    config = os.path.join(home, "config.toml")
    standalone = ["--standalone"] if MODE == "call" else []
    command = [binary, *args, *standalone, "--config", config]
    try:
        outcome = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=portico_env(home),
            timeout=TIMEOUT * 2,
        )
    except subprocess.TimeoutExpired:
        raise SystemExit(f"`portico {' '.join(args[:2])}` did not finish within {TIMEOUT * 2}s")
    if outcome.stderr:
        LOG.write(outcome.stderr)
        LOG.flush()
    if outcome.returncode != 0:
        raise SystemExit(f"`portico {' '.join(args[:2])}` exited {outcome.returncode}: {outcome.stderr.strip()[-500:]}")
    return outcome.stdout


class Serving:
    """`portico serve` for mode call-daemon, stopped when the scenario is done."""

    def __init__(self, binary, home):
        config = os.path.join(home, "config.toml")
        self.child = subprocess.Popen(
            [binary, "serve", "--config", config],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=portico_env(home),
        )
        ready = queue.Queue()

        def read():
            for line in self.child.stderr:
                LOG.write(line)
                LOG.flush()
                if line.startswith("portico: ready"):
                    ready.put(True)
            ready.put(False)

        threading.Thread(target=read, daemon=True).start()
        try:
            if not ready.get(timeout=TIMEOUT * 2):
                raise SystemExit("portico serve exited before it was ready")
        except queue.Empty:
            self.close()
            raise SystemExit(f"portico serve was not ready within {TIMEOUT * 2}s")

    def close(self):
        self.child.send_signal(signal.SIGTERM)
        try:
            self.child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()


def run_with_call(binary, home):
    """The scenario with `portico call` as the client: list, then call what the scenario asks."""
    tools = json.loads(portico_command(binary, home, ["tools", "--json"]))
    note(f"portico lists {[t['name'] for t in tools]}")
    calls = CONTEXT.get("toolCalls")
    if calls is None:
        calls = []
        for tool in tools:
            arguments = arguments_for(tool, tools)
            if arguments is not None:
                calls.append({"name": tool["name"], "arguments": arguments})
    for call in calls:
        # As in the door's run: `null`s included.
        arguments = call.get("arguments", {})
        result = portico_command(
            binary,
            home,
            ["call", call["name"], "--args", json.dumps(arguments), "--json", "--elicit", "defaults"],
        )
        note(f"{call['name']}: {result.strip()[:300]}")


def suite_process():
    """The conformance suite's node process, which serves the scenario: this script's nearest
    ancestor named `node` (the suite runs the command through a shell)."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read()
        name = fields[fields.index("(") + 1 : fields.rindex(")")]
        if name == "node":
            return pid
        pid = int(fields[fields.rindex(")") + 2 :].split()[1])
    raise SystemExit("cannot find the conformance suite's node process among this script's ancestors")


def check_loopback_only():
    """With CLIENT_DRIVER_LOOPBACK_CHECK (tests/peers/check-loopback-only.cjs) and CLIENT_DRIVER_NODE
    set, fails unless every socket the scenario's server listens on is a loopback one."""
    check = os.environ.get("CLIENT_DRIVER_LOOPBACK_CHECK")
    node = os.environ.get("CLIENT_DRIVER_NODE")
    if not check or not node:
        return
    outcome = subprocess.run([node, check, str(suite_process())], capture_output=True, text=True)
    note(f"listeners: {outcome.stdout.strip()}")
    if outcome.returncode != 0:
        raise SystemExit(f"the scenario's server listens beyond loopback: {outcome.stdout.strip()}")


def main():
    if len(sys.argv) < 2:
        raise SystemExit("usage: client-driver.py SERVER_URL")
    binary = os.environ.get("PORTICO_BIN")
    if not binary:
        raise SystemExit("PORTICO_BIN must name the portico binary")
    check_loopback_only()
    with tempfile.TemporaryDirectory(prefix="portico-client-driver.") as home:
        with open(os.path.join(home, "config.toml"), "w") as config:
            config.write(portico_config(sys.argv[-1]))
        if MODE in ("call", "call-daemon") and not AUTH:
            serving = Serving(binary, home) if MODE == "call-daemon" else None
            try:
                run_with_call(binary, home)
            finally:
                if serving:
                    serving.close()
            return
        if AUTH:
            login(binary, home)
        door = Door(binary, home)
        try:
            run(door)
        finally:
            door.close()


if __name__ == "__main__":
    try:
        main()
    except SystemExit as failure:
        if failure.code not in (None, 0):
            note(f"failed: {failure.code}")
        raise
