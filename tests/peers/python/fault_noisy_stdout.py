#!/usr/bin/env python3
"""Fault peer: stdout carries junk lines before every real reply.

Before each JSON-RPC reply it writes, each on its own line:
  1. "this is not json"
  2. a line of 20 MiB of 'x'   (size: --long-line-bytes N, 0 to leave it out)
  3. a JSON array:             ["not","a","message",1,2,3]
  4. garbage bytes (invalid UTF-8, a NUL, control characters)
and then the real reply. Notifications get no reply and so no noise.

Tools:
  echo  {message: string} -> text "echo: <message>"
"""

import argparse

from _stdio_peer import StdioPeer, text_result

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--long-line-bytes", type=int, default=20 * 1024 * 1024,
                    help="length of the line of 'x' (default 20 MiB; 0 disables it)")
args = parser.parse_args()

NOT_JSON = b"this is not json\n"
LONG_LINE = b"x" * args.long_line_bytes + b"\n" if args.long_line_bytes > 0 else b""
JSON_ARRAY = b'["not","a","message",1,2,3]\n'
GARBAGE = b"\xff\xfe\x00\x01garbage\x80\x81\xc3\x28\x1b[31m\x7f\n"


def noise(out):
    out.write(NOT_JSON)
    if LONG_LINE:
        out.write(LONG_LINE)
    out.write(JSON_ARRAY)
    out.write(GARBAGE)


peer = StdioPeer("fault-noisy-stdout")
peer.before_reply = noise


@peer.tool(
    "echo",
    "Echoes the message back as 'echo: <message>'.",
    {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
)
def echo(arguments, msg_id):
    return text_result(f"echo: {arguments.get('message', '')}")


if __name__ == "__main__":
    peer.run()
