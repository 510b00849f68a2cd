#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target into corpus/<target>/seed-*.

Seeds are real messages: MCP requests of each protocol era, framed both ways for stdio; A2A requests
in JSON-RPC 1.0 and 0.3, HTTP+JSON 1.0 and 0.3, and the legacy tasks/send; agent cards of both forms;
the configs from README.md and docs/; hostile hosts and URLs for the SSRF check. Rerun after adding
seeds (it only writes seed-* files; what the fuzzer found stays), then `cargo fuzz cmin` the target.
"""

import json
import pathlib
import re

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
ERAS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
SEP = "\n~~~\n"


def j(value):
    return json.dumps(value, separators=(",", ":"))


def write(target, name, data):
    directory = HERE / "corpus" / target
    directory.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (directory / f"seed-{name}").write_bytes(data)


def initialize(era, id_=1):
    return {"jsonrpc": "2.0", "id": id_, "method": "initialize", "params": {
        "protocolVersion": era,
        "capabilities": {"sampling": {}, "roots": {"listChanged": True}, "elicitation": {}},
        "clientInfo": {"name": "fuzz", "version": "1.0"}}}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def mcp_requests(era):
    """The session after the handshake: every method the door serves."""
    meta = {}
    if era == "2026-07-28":
        meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": era,
                          "io.modelcontextprotocol/clientCapabilities": {}}}
    def req(id_, method, params=None):
        message = {"jsonrpc": "2.0", "id": id_, "method": method}
        p = dict(params or {})
        p.update(meta)
        if p or params is not None:
            message["params"] = p
        return message
    return [
        req(2, "tools/list", {}),
        req(3, "tools/call", {"name": "echo", "arguments": {"message": "hi"}}),
        req(4, "tools/call", {"name": "portico_agent_echo", "arguments": {"message": "report now"},
                             "_meta": {"progressToken": "p1"}}),
        req(5, "resources/list", {}),
        req(6, "prompts/list", {}),
        req(7, "ping"),
        req(8, "completion/complete", {"ref": {"type": "ref/prompt", "name": "x"},
                                      "argument": {"name": "a", "value": "b"}}),
        req(9, "logging/setLevel", {"level": "debug"}),
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}},
        req(10, "resources/subscribe", {"uri": "portico://x"}),
        req(11, "tools/call", {"name": "echo", "arguments": {"message": 5}}),
        req(12, "tools/call", {"name": "nope", "arguments": {}}),
    ]


def newline(messages):
    return "".join(j(m) + "\n" for m in messages)


def content_length(messages):
    out = b""
    for m in messages:
        body = j(m).encode()
        out += b"Content-Length: %d\r\n\r\n" % len(body) + body
    return out


def stdio_seeds():
    for era in ERAS:
        session = [initialize(era), INITIALIZED] + mcp_requests(era)
        write("mcp_stdio", f"{era}-newline", newline(session))
        write("mcp_stdio", f"{era}-content-length", content_length(session))
        write("stdio_framing", f"{era}-newline", newline(session[:4]))
        write("stdio_framing", f"{era}-content-length", content_length(session[:4]))
    write("mcp_stdio", "tool-search", newline([initialize("2025-06-18"), INITIALIZED,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "portico_agent_echo", "arguments": {"message": "tool x"}}}]))
    mixed = (j(initialize("2025-06-18")).encode() + b"\r\n"
             + content_length([INITIALIZED])
             + b"\n\n" + j({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode() + b"\n")
    write("stdio_framing", "mixed", mixed)
    write("stdio_framing", "content-type-first",
          b'Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: 46\r\n\r\n'
          b'{"jsonrpc":"2.0","id":1,"method":"ping"}      ')
    write("stdio_framing", "lf-headers", b'content-length: 40\n\n{"jsonrpc":"2.0","id":1,"method":"ping"}')
    write("stdio_framing", "bad-length", b'Content-Length: abc\r\n\r\n{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    write("stdio_framing", "negative-length", b'Content-Length: -1\r\n\r\n{"id":2}')
    write("stdio_framing", "two-lengths", b'Content-Length: 5\r\nContent-Length: 6\r\n\r\n{"a":1}')
    write("stdio_framing", "oversized-line", b'{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":"' + b"x" * 400 + b'"}}\n')
    write("stdio_framing", "oversized-length", b'Content-Length: 400\r\n\r\n{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":"' + b"x" * 336 + b'"}}')
    write("stdio_framing", "truncated", b'Content-Length: 100\r\n\r\n{"jsonrpc":"2.0","id":3')
    write("stdio_framing", "batch", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n')
    write("stdio_framing", "not-json", b'hello there\r\n\x00\xff\xfe{\n')
    write("stdio_framing", "not-jsonrpc", b'{"id":7,"what":"no method"}\n{"jsonrpc":"2.0","method":"notifications/nope","params":3}\n')
    write("stdio_framing", "header-then-garbage", b'Content-Length: 10\r\nnot a header\r\n{"skip":[1,"]"]}\n{"jsonrpc":"2.0","id":4,"method":"ping"}\n')
    write("stdio_framing", "cr-only", b'{"jsonrpc":"2.0","id":1,"method":"ping"}\r\r\n')
    write("stdio_framing", "escaped-json", b'Content-Length: x\r\n\r\n{"a":"\\"}\\\\","b":[{}]}{"jsonrpc":"2.0","id":5,"method":"ping"}\n')


def http_request(body=None, method=None, path=None, headers=()):
    out = ""
    if method:
        out += f"{method} {path}\n"
    for name, value in headers:
        out += f"{name}: {value}\n"
    if headers or method:
        out += "\n"
    if body is not None:
        out += body if isinstance(body, str) else j(body)
    return out


def mcp_http_seeds():
    for era in ERAS:
        if era == "2024-11-05":
            continue
        headers = [("MCP-Protocol-Version", era)]
        if era == "2026-07-28":
            # Stateless: every request stands alone, with its method and name in headers.
            reqs = mcp_requests(era)
            parts = []
            for r in reqs:
                h = headers + [("Mcp-Method", r.get("method", ""))]
                if r.get("method") == "tools/call":
                    h.append(("Mcp-Name", r["params"]["name"]))
                parts.append(http_request(r, headers=h))
            write("mcp_http", era, SEP.join(parts[:8]))
            write("mcp_http", era + "-discover", http_request(
                {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}},
                headers=headers))
            write("mcp_http", era + "-listen", http_request(
                {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                 "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": era}}},
                headers=headers + [("Mcp-Method", "subscriptions/listen")]))
            continue
        parts = [http_request(initialize(era)), http_request(INITIALIZED, headers=headers)]
        parts += [http_request(r, headers=headers) for r in mcp_requests(era)[:5]]
        parts.append(http_request(method="GET", path="/mcp", headers=headers))
        write("mcp_http", era, SEP.join(parts))
        write("legacy_message", era, SEP.join(
            [j(initialize(era)), j(INITIALIZED)] + [j(r) for r in mcp_requests(era)[:6]]))
    write("mcp_http", "bad-json", http_request("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\""))
    write("mcp_http", "wrong-content-type", http_request(initialize("2025-06-18"), headers=[("Content-Type", "text/plain")]))
    write("mcp_http", "bad-host", http_request(initialize("2025-06-18"), headers=[("Host", "evil.example")]))
    write("mcp_http", "origin", http_request(initialize("2025-06-18"), headers=[("Origin", "http://evil.example")]))
    write("mcp_http", "unknown-session", http_request(mcp_requests("2025-06-18")[0], headers=[("Mcp-Session-Id", "deadbeef")]))
    write("mcp_http", "delete", http_request(initialize("2025-11-25")) + SEP + http_request(method="DELETE", path="/mcp"))
    write("mcp_http", "api", SEP.join([
        http_request(method="GET", path="/api/health"),
        http_request(method="GET", path="/api/agents"),
        http_request(method="GET", path="/api/mcp/servers"),
        http_request({"message": "hello"}, method="POST", path="/api/agents/echo/message"),
        http_request(method="GET", path="/api/audit?limit=5"),
        http_request(method="GET", path="/api/conversations/x"),
    ]))
    write("legacy_message", "batch", j([initialize("2024-11-05"), INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]))
    write("legacy_message", "empty-batch", "[]")
    write("legacy_message", "no-session", http_request(initialize("2024-11-05"), method="POST", path="/message"))
    write("legacy_message", "wrong-session", http_request(initialize("2024-11-05"), method="POST", path="/message?sessionId=0000"))
    write("legacy_message", "parse-error", "{\"jsonrpc\":")


def v1_message(text, **extra):
    m = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}
    m.update(extra)
    return m


def v03_message(text, **extra):
    m = {"kind": "message", "messageId": "m-1", "role": "user", "parts": [{"kind": "text", "text": text}]}
    m.update(extra)
    return m


def a2a_seeds():
    v1 = [("A2A-Version", "1.0")]
    v03 = [("A2A-Version", "0.3")]
    rpc = lambda id_, method, params: {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
    for word in ["hello", "ask me", "report", "fail", "login", "forbidden", "tool x"]:
        write("a2a_jsonrpc", f"v1-send-{word.split()[0]}", SEP.join([
            http_request(rpc(1, "SendMessage", {"message": v1_message(word)}), headers=v1),
            http_request(rpc(2, "GetTask", {"id": "$TASK", "historyLength": 2}), headers=v1),
        ]))
        write("a2a_jsonrpc", f"v03-send-{word.split()[0]}", SEP.join([
            http_request(rpc(1, "message/send", {"message": v03_message(word)}), headers=v03),
            http_request(rpc(2, "tasks/get", {"id": "$TASK"}), headers=v03),
        ]))
    write("a2a_jsonrpc", "v1-lifecycle", SEP.join([
        http_request(rpc(1, "SendMessage", {"message": v1_message("ask"), "configuration": {"returnImmediately": True}}), headers=v1),
        http_request(rpc(2, "SendMessage", {"message": v1_message("red", taskId="$TASK")}), headers=v1),
        http_request(rpc(3, "ListTasks", {"pageSize": 2}), headers=v1),
        http_request(rpc(4, "CancelTask", {"id": "$TASK"}), headers=v1),
        http_request(rpc(5, "SubscribeToTask", {"id": "$TASK"}), headers=v1),
        http_request(rpc(6, "CreateTaskPushNotificationConfig", {"taskId": "$TASK", "config": {"url": "https://push.invalid/hook", "token": "t"}}), headers=v1),
        http_request(rpc(7, "ListTaskPushNotificationConfigs", {"taskId": "$TASK"}), headers=v1),
        http_request(rpc(8, "GetExtendedAgentCard", {}), headers=v1),
    ]))
    write("a2a_jsonrpc", "v03-lifecycle", SEP.join([
        http_request(rpc(1, "message/send", {"message": v03_message("ask")}), headers=v03),
        http_request(rpc(2, "message/send", {"message": v03_message("blue", taskId="$TASK")}), headers=v03),
        http_request(rpc(3, "tasks/cancel", {"id": "$TASK"}), headers=v03),
        http_request(rpc(4, "tasks/resubscribe", {"id": "$TASK"}), headers=v03),
        http_request(rpc(5, "tasks/pushNotificationConfig/set", {"taskId": "$TASK", "pushNotificationConfig": {"url": "https://push.invalid/hook"}}), headers=v03),
        http_request(rpc(6, "tasks/pushNotificationConfig/get", {"id": "$TASK"}), headers=v03),
        http_request(rpc(7, "tasks/pushNotificationConfig/list", {"id": "$TASK"}), headers=v03),
        http_request(rpc(8, "agent/getAuthenticatedExtendedCard", {}), headers=v03),
    ]))
    write("a2a_jsonrpc", "v1-stream", http_request(rpc(1, "SendStreamingMessage", {"message": v1_message("report")}), headers=v1 + [("Accept", "text/event-stream")]))
    write("a2a_jsonrpc", "v03-stream", http_request(rpc(1, "message/stream", {"message": v03_message("report")}), headers=v03 + [("Accept", "text/event-stream")]))
    write("a2a_jsonrpc", "parts", http_request(rpc(1, "SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [
        {"text": "a"}, {"data": {"k": [1, 2]}}, {"url": "https://x.example/f.pdf", "mediaType": "application/pdf", "filename": "f.pdf"},
        {"raw": "aGVsbG8=", "mediaType": "text/plain"}]}}), headers=v1))
    write("a2a_jsonrpc", "v03-parts", http_request(rpc(1, "message/send", {"message": {"kind": "message", "messageId": "m", "role": "user", "parts": [
        {"kind": "text", "text": "a"}, {"kind": "data", "data": {"k": 1}},
        {"kind": "file", "file": {"uri": "https://x.example/f.pdf", "mimeType": "application/pdf", "name": "f.pdf"}},
        {"kind": "file", "file": {"bytes": "aGVsbG8=", "mimeType": "text/plain"}}]}}), headers=v03))
    write("a2a_jsonrpc", "bad-version", http_request(rpc(1, "SendMessage", {"message": v1_message("x")}), headers=[("A2A-Version", "9.9")]))
    write("a2a_jsonrpc", "unknown-agent", http_request(rpc(1, "SendMessage", {"message": v1_message("x")}), method="POST", path="/a2a/nobody"))
    write("a2a_jsonrpc", "batch", j([rpc(1, "GetTask", {"id": "x"})]))
    write("a2a_jsonrpc", "no-method", j({"jsonrpc": "2.0", "id": 1}))
    write("a2a_jsonrpc", "auth", http_request(rpc(1, "SendMessage", {"message": v1_message("hi")}), headers=[("Authorization", "Bearer  abc ")]))
    write("a2a_jsonrpc", "cards", SEP.join([
        http_request(method="GET", path="/.well-known/agent-card.json"),
        http_request(method="GET", path="/.well-known/agent.json"),
        http_request(method="GET", path="/a2a/echo/.well-known/agent-card.json", headers=v03),
    ]))

    base = "/a2a/echo"
    write("a2a_rest", "v1-send", SEP.join([
        http_request({"message": v1_message("ask")}, headers=v1),
        http_request(method="GET", path=f"{base}/tasks/$TASK?historyLength=1", headers=v1),
        http_request({"message": v1_message("red", taskId="$TASK")}, method="POST", path=f"{base}/message:send", headers=v1),
        http_request(method="GET", path=f"{base}/tasks?pageSize=1&status=TASK_STATE_COMPLETED", headers=v1),
        http_request({}, method="POST", path=f"{base}/tasks/$TASK:cancel", headers=v1),
        http_request({"url": "https://push.invalid/h"}, method="POST", path=f"{base}/tasks/$TASK/pushNotificationConfigs", headers=v1),
        http_request(method="GET", path=f"{base}/tasks/$TASK/pushNotificationConfigs", headers=v1),
        http_request(method="GET", path=f"{base}/extendedAgentCard", headers=v1),
    ]))
    write("a2a_rest", "v1-stream", http_request({"message": v1_message("report")}, method="POST", path=f"{base}/message:stream", headers=v1))
    write("a2a_rest", "v1-subscribe", SEP.join([
        http_request({"message": v1_message("ask"), "configuration": {"returnImmediately": True}}, headers=v1),
        http_request(method="POST", path=f"{base}/tasks/$TASK:subscribe", headers=v1),
        http_request(method="DELETE", path=f"{base}/tasks/$TASK/pushNotificationConfigs/x", headers=v1),
    ]))
    write("a2a_rest", "v03-send", SEP.join([
        http_request({"message": v03_message("ask")}, method="POST", path=f"{base}/v1/message:send", headers=v03),
        http_request(method="GET", path=f"{base}/v1/tasks/$TASK", headers=v03),
        http_request({}, method="POST", path=f"{base}/v1/tasks/$TASK:cancel", headers=v03),
        http_request(method="GET", path=f"{base}/v1/card", headers=v03),
        http_request({"message": v03_message("report")}, method="POST", path=f"{base}/v1/message:stream", headers=v03),
        http_request({"pushNotificationConfig": {"url": "https://push.invalid/h"}}, method="POST", path=f"{base}/v1/tasks/$TASK/pushNotificationConfigs", headers=v03),
    ]))
    write("a2a_rest", "legacy-tasks-send", SEP.join([
        http_request({"id": "t1", "sessionId": "s1", "message": {"role": "user", "parts": [{"type": "text", "text": "hello"}]}}, method="POST", path="/a2a/tasks/send"),
        http_request({"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": {"id": "t2", "message": {"role": "user", "parts": [{"type": "text", "text": "report"}]}}}, method="POST", path="/a2a/tasks/send"),
        http_request({"id": "t3"}, method="POST", path="/a2a/tasks/send"),
    ]))
    write("a2a_rest", "bad-body", http_request("{\"message\":", method="POST", path=f"{base}/message:send"))
    write("a2a_rest", "no-message", http_request({}, method="POST", path=f"{base}/message:send"))

    # Documents the client reads.
    card_v1 = {"name": "Echo", "description": "d", "version": "1.0.0",
               "supportedInterfaces": [{"url": "http://127.0.0.1:4200/a2a/echo", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                                       {"url": "/a2a/echo", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0", "tenant": "t"}],
               "capabilities": {"streaming": True, "pushNotifications": True},
               "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
               "skills": [{"id": "s", "name": "S", "description": "d", "tags": []}]}
    card_v03 = {"name": "Echo", "description": "d", "url": "http://127.0.0.1:4200/a2a/echo", "protocolVersion": "0.3.0",
                "preferredTransport": "JSONRPC", "additionalInterfaces": [{"url": "http://127.0.0.1:4200/a2a/echo/v1", "transport": "HTTP+JSON"}],
                "capabilities": {"streaming": False}, "skills": []}
    write("a2a_parse", "card-v1", j(card_v1))
    write("a2a_parse", "card-v03", j(card_v03))
    write("a2a_parse", "card-relative", j({"name": "x", "url": "../rpc"}))
    write("a2a_parse", "card-grpc-only", j({"name": "x", "supportedInterfaces": [{"url": "grpc://x", "protocolBinding": "GRPC"}]}))
    write("a2a_parse", "message-v1", j(v1_message("hi", contextId="c", taskId="t")))
    write("a2a_parse", "message-v03", j({"kind": "message", "messageId": "m", "role": "agent", "parts": [
        {"kind": "text", "text": "a"}, {"kind": "data", "data": {"k": 1}},
        {"kind": "file", "file": {"uri": "https://x/y.pdf", "mimeType": "application/pdf", "name": "y.pdf"}},
        {"kind": "file", "file": {"bytes": "aGk=", "name": "b.txt"}}]}))
    write("a2a_parse", "task-v1", j({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": v1_message("which?")},
                                     "artifacts": [{"artifactId": "a", "name": "response", "parts": [{"text": "x"}]}], "history": [v1_message("q")]}))
    write("a2a_parse", "task-v03", j({"kind": "task", "id": "t", "contextId": "c", "status": {"state": "input-required"},
                                      "artifacts": [{"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}]}))
    write("a2a_parse", "events", j({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}}}))
    write("a2a_parse", "artifact-event", j({"artifactUpdate": {"taskId": "t", "artifact": {"artifactId": "a", "parts": [{"text": "p"}]}, "append": True}}))
    write("a2a_parse", "rpc-result", j({"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": "t", "status": {"state": "TASK_STATE_WORKING"}}}}))


def config_seeds():
    sources = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    n = 0
    for source in sources:
        for block in re.findall(r"```toml\n(.*?)```", source.read_text(), re.S):
            n += 1
            write("config", f"{source.stem}-{n}", block)
    write("config", "default", (ROOT / "crates/portico-config/src/default.toml").read_text())
    door = (ROOT / "crates/portico-fuzz-targets/src/door.rs").read_text()
    write("config", "fuzz-door", door.split('r#"', 1)[1].split('"#', 1)[0])
    write("config", "bad-types", '[server]\nlisten = 4200\ntoken = ["x"]\n[[mcp_servers]]\nname = "a b"\ntimeout_secs = -1\n[mcp_servers.transport]\ntype = "ftp"\n')
    write("config", "agent-file", 'name = "writer"\ndescription = "w"\ntools = ["file_*"]\nmax_iterations = 3\n[model]\nprovider = "openai"\nmodel = "gpt-4o"\nbase_url = "http://127.0.0.1:1/v1"\napi_key = "${OPENAI_API_KEY}"\n')
    write("config", "syntax", '[server\nlisten = "\n\u00e9\t=\n')
    write("config", "a2a", '[a2a]\nenabled = true\nlisten_path = "/agents"\npublic_url = "https://x.example"\nmax_tasks = 0\n[[a2a.external_agents]]\nname = "far"\nurl = "https://far.example"\nheaders = { X-Api-Key = "${KEY}" }\n')


def ssrf_seeds():
    hosts = ["127.0.0.1", "0x7f.1", "2130706433", "017700000001", "0177.0.0.1", "127.1", "[::1]", "[::ffff:127.0.0.1]",
             "[::ffff:7f00:1]", "[64:ff9b::a9fe:a9fe]", "[2002:a9fe:a9fe::]", "[2001:0:4136:e378:8000:63bf:5601:5601]",
             "169.254.169.254", "0xA9FE.0xA9FE", "0251.0376.0251.0376", "[fd00:ec2::254]", "100.100.100.200",
             "metadata.google.internal.", "METADATA", "instance-data", "metadata.goog", "localhost", "0", "0.0.0.0",
             "[::]", "[fe80::1%25eth0]", "255.255.255.255", "224.0.0.1", "240.0.0.1", "10.0.0.1", "172.16.0.1",
             "192.168.1.1", "100.64.0.1", "[fc00::1]", "[fec0::1]", "192.0.2.1", "93.184.216.34", "example.com",
             "1.1.1.1.", "[::127.0.0.1]", "[2001:db8::1]", "%31%32%37.0.0.1", "127.0.0.1.nip.io", "①②⑦.0.0.1"]
    for i, host in enumerate(hosts):
        write("ssrf", f"host-{i:02}", host)
    urls = ["http://127.0.0.1:4200/", "https://user:pass@169.254.169.254/latest/meta-data/", "file:///etc/passwd",
            "gopher://127.0.0.1/", "http://[::ffff:a9fe:a9fe]/", "http:/\\127.0.0.1", "HTTP://LOCALHOST", "http://0x7f000001/",
            "https://metadata.google.internal/computeMetadata/v1/", "http://127.0.0.1#@example.com/", "http://example.com@127.0.0.1/",
            "ws://127.0.0.1/", "http://", "https://example.com/path?q=1"]
    for i, url in enumerate(urls):
        write("ssrf", f"url-{i:02}", url)
    for i, raw in enumerate([bytes([127, 0, 0, 1]), bytes([169, 254, 169, 254]), bytes([0] * 10 + [0xff, 0xff, 10, 0, 0, 1]),
                             bytes([0x20, 0x02, 0xa9, 0xfe, 0xa9, 0xfe] + [0] * 10), bytes([0x20, 0x01, 0, 0] + [0] * 8 + [0x56, 0xfe, 0x56, 0xfe])]):
        write("ssrf", f"raw-{i}", raw)


if __name__ == "__main__":
    stdio_seeds()
    mcp_http_seeds()
    a2a_seeds()
    config_seeds()
    ssrf_seeds()
