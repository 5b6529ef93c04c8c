#!/usr/bin/python3
"""Runs a command and succeeds only when it exits with the given code.

  exit_code.py CODE COMMAND [ARGS...]      (lit: %exit1 COMMAND ...)

LLVM's `not` accepts any non-zero exit; archc promises exit code 1 for every
error (and never a crash or a signal), so its failing runs are checked with
this instead. Output and input pass through unchanged.
"""
import subprocess
import sys

want = int(sys.argv[1])
rc = subprocess.run(sys.argv[2:]).returncode
if rc != want:
    sys.stderr.write(f"exit_code.py: {' '.join(sys.argv[2:])}: exit code "
                     f"{rc}, expected {want}\n")
    sys.exit(1)
sys.exit(0)
