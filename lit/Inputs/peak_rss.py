#!/usr/bin/python3
"""Runs a command and prints its peak resident memory: `peak_rss_mib N`.

Usage: peak_rss.py COMMAND [ARGS...]

N is the child's ru_maxrss (wait4) in MiB, rounded up: its largest resident set, mapped file
pages (a memory-mapped checkpoint's) included. Fails if the command fails. Pipe into
at_most.py to bound it.
"""
import os
import subprocess
import sys

proc = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(proc.pid, 0)
rc = os.waitstatus_to_exitcode(status)
if rc != 0:
    sys.stderr.write("peak_rss.py: %s: exit code %d\n" % (" ".join(sys.argv[1:]), rc))
    sys.exit(1)
print("peak_rss_mib %d" % ((usage.ru_maxrss + 1023) // 1024))
