#!/usr/bin/env python3
"""A server that is slow to start, as a cold `npx -y` or a first `uvx` is.

Usage: slow_start.py SECONDS COMMAND [ARGS...]

Writes a download-like line to stderr every second for SECONDS seconds without reading stdin
(whatever the client sends meanwhile waits in the pipe, as it does while a package runner
downloads), then replaces itself with COMMAND, which reads the waiting messages in order and
answers them late.
"""

import os
import sys
import time


def main() -> None:
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        sys.exit(2)
    seconds = float(sys.argv[1])
    command = sys.argv[2:]
    started = time.monotonic()
    while True:
        left = seconds - (time.monotonic() - started)
        if left <= 0:
            break
        sys.stderr.write(f"slow_start: fetching packages, {left:.0f}s left\n")
        sys.stderr.flush()
        time.sleep(min(1.0, left))
    sys.stderr.write("slow_start: starting the server\n")
    sys.stderr.flush()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
