#!/usr/bin/env python3
"""Fault peer: writes "fatal: cannot start" to stderr and exits with code 1 at once."""

import sys

sys.stderr.write("fatal: cannot start\n")
sys.stderr.flush()
sys.exit(1)
