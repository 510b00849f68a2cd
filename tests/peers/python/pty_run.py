#!/usr/bin/env python3
"""Runs a command with a terminal for its stdin and stderr (a pseudo-terminal) and its stdout on a
pipe, as a person at a terminal runs it with the result redirected, and types answers when the
terminal shows what it waits for.

Usage: pty_run.py [--expect TEXT --send LINE]... [--interrupt TEXT] -- COMMAND [ARGS...]

Each --expect/--send pair, in order: once TEXT has appeared on the terminal (after the previous
pair's), LINE and a newline are typed. With --interrupt, once TEXT has appeared (after the pairs'),
the command is sent SIGINT, as Ctrl-C would. Prints one JSON object: {"exit": the exit status,
"stdout": what it wrote to stdout, "terminal": everything the terminal showed}. Gives up (exit
status null) after 60 s. Standard library only.
"""

import json
import os
import select
import signal
import subprocess
import sys
import time

argv = sys.argv[1:]
split = argv.index("--")
options, command = argv[:split], argv[split + 1 :]
pairs = []
interrupt = None
while options:
    flag, value, *options = options
    if flag == "--interrupt":
        interrupt = value
    elif flag == "--expect":
        pairs.append([value, None])
    elif flag == "--send":
        pairs[-1][1] = value
    else:
        raise SystemExit(f"unknown flag {flag}")

master, slave = os.openpty()
child = subprocess.Popen(command, stdin=slave, stderr=slave, stdout=subprocess.PIPE)
os.close(slave)

terminal = b""
stdout = b""
seen_up_to = 0
# The terminal and the pipe, until each reaches its end.
open_fds = {master, child.stdout.fileno()}
deadline = time.monotonic() + 60
while open_fds and time.monotonic() < deadline:
    ready, _, _ = select.select(list(open_fds), [], [], 0.1)
    for fd in ready:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal's end: EIO once the command exits
            chunk = b""
        if not chunk:
            open_fds.discard(fd)
        elif fd == master:
            terminal += chunk
        else:
            stdout += chunk
    if pairs:
        expect, send = pairs[0]
        found = terminal.find(expect.encode(), seen_up_to)
        if found >= 0:
            seen_up_to = found + len(expect)
            os.write(master, (send or "").encode() + b"\n")
            pairs.pop(0)
    elif interrupt is not None and terminal.find(interrupt.encode(), seen_up_to) >= 0:
        child.send_signal(signal.SIGINT)
        interrupt = None
    if child.poll() is not None and child.stdout.fileno() not in open_fds:
        break
if child.poll() is None:
    child.kill()
child.wait()
# What the terminal still holds.
while master in open_fds and select.select([master], [], [], 0.05)[0]:
    try:
        chunk = os.read(master, 65536)
    except OSError:
        chunk = b""
    if not chunk:
        break
    terminal += chunk

print(json.dumps({
    "exit": child.poll(),
    "stdout": stdout.decode(errors="replace"),
    "terminal": terminal.decode(errors="replace"),
}))
