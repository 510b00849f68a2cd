#!/usr/bin/env python3
"""Client-features peer: a stdlib MCP stdio server whose tools use what a client offers during a
call, for testing `portico call` as an MCP client.

Tools (each runs on a thread of its own, so the server keeps reading while it runs):
  slow {seconds}   sends a log message, then a progress notification every 0.1 s (with the
                   call's progressToken) and answers "slept" after `seconds`, unless cancelled
  ask {}           asks the client `elicitation/create` (a form with defaults and a required
                   field when `required` is true) and answers "answer: <the client's result JSON>"
  sample {}        asks the client `sampling/createMessage` and answers "sampled: <result JSON>",
                   or "refused: <the error's message>"

Flags:
  --record FILE    append one line per event: "started <id>" when `slow` starts, and
                   "cancelled <id> <unix time>" when notifications/cancelled arrives
"""

import argparse
import itertools
import json
import queue
import sys
import threading
import time

from _stdio_peer import NO_REPLY, StdioPeer, text_result

parser = argparse.ArgumentParser()
parser.add_argument("--record", default=None)
args = parser.parse_args()

record_lock = threading.Lock()


def record(line):
    if not args.record:
        return
    with record_lock, open(args.record, "a") as out:
        out.write(line + "\n")


class FeaturesPeer(StdioPeer):
    def __init__(self, name):
        super().__init__(name)
        self.cancelled = set()
        self.pending = {}
        self.ids = itertools.count(1)

    def handle_line(self, line):
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if isinstance(msg, dict):
            if msg.get("method") == "notifications/cancelled":
                request_id = (msg.get("params") or {}).get("requestId")
                self.cancelled.add(json.dumps(request_id))
                record(f"cancelled {json.dumps(request_id)} {time.time()}")
                return
            if "method" not in msg and msg.get("id") in self.pending:
                self.pending.pop(msg["id"]).put(msg)
                return
        super().handle_line(line)

    def ask_client(self, method, params):
        request_id = f"peer-{next(self.ids)}"
        answer = queue.Queue()
        self.pending[request_id] = answer
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return answer.get(timeout=60)

    def later(self, msg_id, work):
        """Runs `work` on a thread and replies with what it returns (nothing for None)."""

        def run():
            result = work()
            if result is not None:
                self.reply(msg_id, result)

        threading.Thread(target=run, daemon=True).start()
        return NO_REPLY


peer = FeaturesPeer("client-features-peer")
# The progress token of each call in flight, by request id.
tokens = {}


def handle_request(method, params, msg_id, base=peer.handle_request):
    if method == "tools/call":
        tokens[json.dumps(msg_id)] = ((params.get("_meta") or {}).get("progressToken"))
    return base(method, params, msg_id)


peer.handle_request = handle_request


@peer.tool("slow", "Reports progress, then answers after `seconds`.", {"type": "object", "properties": {"seconds": {"type": "number"}}})
def slow(arguments, msg_id):
    seconds = float(arguments.get("seconds", 1))
    key = json.dumps(msg_id)

    def work():
        record(f"started {key}")
        peer.send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "logger": "slow", "data": "working"}})
        token = tokens.get(key)
        steps = max(1, int(seconds * 10))
        for step in range(1, steps + 1):
            if key in peer.cancelled:
                return None
            if token is not None:
                peer.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": step, "total": steps, "message": f"step {step}"}})
            time.sleep(seconds / steps)
        return None if key in peer.cancelled else text_result("slept")

    return peer.later(msg_id, work)


@peer.tool("ask", "Asks the client a form's questions.", {"type": "object", "properties": {"required": {"type": "boolean"}}})
def ask(arguments, msg_id):
    properties = {
        "name": {"type": "string", "description": "Your name", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "color": {"type": "string", "enum": ["red", "green"], "default": "green"},
        "subscribe": {"type": "boolean", "default": True},
    }
    schema = {"type": "object", "properties": properties, "required": []}
    if arguments.get("required"):
        properties["city"] = {"type": "string"}
        schema["required"] = ["city"]

    def work():
        answer = peer.ask_client("elicitation/create", {"message": "Tell me about you", "requestedSchema": schema})
        return text_result("answer: " + json.dumps(answer.get("result", answer.get("error")), sort_keys=True))

    return peer.later(msg_id, work)


@peer.tool("sample", "Asks the client's model.", {"type": "object", "properties": {}})
def sample(arguments, msg_id):
    def work():
        answer = peer.ask_client("sampling/createMessage", {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 20})
        if "error" in answer:
            return text_result("refused: " + answer["error"].get("message", ""))
        return text_result("sampled: " + json.dumps(answer["result"], sort_keys=True))

    return peer.later(msg_id, work)


if __name__ == "__main__":
    peer.run()
