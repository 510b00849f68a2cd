#!/usr/bin/env python3
"""Well-behaved stdlib peer for environment and process-lifecycle tests.

Writes one line "env_dump started" to stderr at start.

Tools:
  env   text: JSON object of the environment the process was exec'd with
        (sorted keys; read from /proc/self/environ, so Python's own
        LC_CTYPE=C.UTF-8 locale coercion does not show up)
  pid   text: JSON {"pid": N, "ppid": N, "pgid": N, "sid": N, "grandchild": N|null}
  echo  {message: string} -> text "echo: <message>"

Flags:
  --ignore-sigterm     ignore SIGTERM, so only SIGKILL ends it
  --ignore-stdin-eof   keep running after stdin reaches EOF (until a signal);
                       with --ignore-sigterm this makes SIGKILL the only way out,
                       which is what a SIGKILL-escalation test needs
  --spawn-grandchild   start a child process (python sleeping 300 s, stdio on
                       /dev/null, same process group) whose pid the `pid` tool
                       reports, to check that a whole process group is cleaned up
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

from _stdio_peer import StdioPeer, text_result

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--ignore-sigterm", action="store_true", help="ignore SIGTERM")
parser.add_argument("--ignore-stdin-eof", action="store_true", help="keep running after stdin EOF")
parser.add_argument("--spawn-grandchild", action="store_true", help="start a sleeping child process")
args = parser.parse_args()

if args.ignore_sigterm:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

grandchild = None
if args.spawn_grandchild:
    grandchild = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Restore SIGTERM's default in the child even when we ignore it.
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
    )

sys.stderr.write("env_dump started\n")
sys.stderr.flush()

peer = StdioPeer("env-dump")


def exec_environment() -> dict:
    """The environment exactly as execve() received it.

    Read from /proc/self/environ, not os.environ: when LC_ALL/LC_CTYPE/LANG
    are all unset, Python's locale coercion (PEP 538) adds LC_CTYPE=C.UTF-8 to
    os.environ at start, which would make an env-clearing test see a variable
    the parent never passed. Falls back to os.environ off Linux.
    """
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return dict(os.environ)
    env = {}
    for entry in raw.split(b"\0"):
        if not entry:
            continue
        key, sep, value = entry.partition(b"=")
        if sep:
            env[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return env


@peer.tool(
    "env",
    "Returns the environment the process was started with (from /proc/self/environ) as a JSON object (text content).",
)
def env(arguments, msg_id):
    return text_result(json.dumps(dict(sorted(exec_environment().items()))))


@peer.tool("pid", "Returns pid, ppid, process group, session and grandchild pid as JSON (text content).")
def pid(arguments, msg_id):
    info = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "pgid": os.getpgrp(),
        "sid": os.getsid(0),
        "grandchild": grandchild.pid if grandchild is not None else None,
    }
    return text_result(json.dumps(info))


@peer.tool(
    "echo",
    "Echoes the message back as 'echo: <message>'.",
    {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
)
def echo(arguments, msg_id):
    return text_result(f"echo: {arguments.get('message', '')}")


def on_eof():
    if args.ignore_stdin_eof:
        sys.stderr.write("env_dump: stdin closed, staying alive (--ignore-stdin-eof)\n")
        sys.stderr.flush()
        while True:
            time.sleep(3600)
    sys.exit(0)


peer.on_eof = on_eof

if __name__ == "__main__":
    peer.run()
