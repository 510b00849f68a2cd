#!/usr/bin/env python3
"""Fault peer: the process dies in the middle of a tool call.

Tools:
  slow  never answered; the process exits with code 3 200 ms after the call arrives.
  ok    answers the text "ok".

Handshake, tools/list and ping behave normally (see _stdio_peer.py).
"""

import os
import sys
import threading

from _stdio_peer import NO_REPLY, StdioPeer, text_result

EXIT_CODE = 3
EXIT_DELAY_SECONDS = 0.2

peer = StdioPeer("fault-exit-mid-call")


@peer.tool("slow", "Never answers: the server exits (code 3) 200 ms after receiving this call.")
def slow(arguments, msg_id):
    def die():
        sys.stderr.write("fault_exit_mid_call: exiting mid-call with code 3\n")
        sys.stderr.flush()
        os._exit(EXIT_CODE)

    threading.Timer(EXIT_DELAY_SECONDS, die).start()
    return NO_REPLY


@peer.tool("ok", "Answers the text 'ok'.")
def ok(arguments, msg_id):
    return text_result("ok")


if __name__ == "__main__":
    peer.run()
