#!/usr/bin/env python3
"""Fault peer: requests that are never answered.

Default mode: the handshake works; tools/call of `hang` is never answered
(the process keeps reading stdin and exits only at EOF or on a signal).
Tool `ok` answers "ok", so a client can show other calls still flow while one hangs.

--hang-handshake: `initialize` and `server/discover` are never answered
(every other request is still answered, e.g. ping).
"""

import argparse

from _stdio_peer import NO_REPLY, StdioPeer, text_result

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--hang-handshake", action="store_true", help="never answer initialize or server/discover")
args = parser.parse_args()

peer = StdioPeer("fault-never-answers")
if args.hang_handshake:
    peer.silent_methods.update({"initialize", "server/discover"})


@peer.tool("hang", "Never answered; the server stays alive until stdin closes.")
def hang(arguments, msg_id):
    return NO_REPLY


@peer.tool("ok", "Answers the text 'ok'.")
def ok(arguments, msg_id):
    return text_result("ok")


if __name__ == "__main__":
    peer.run()
