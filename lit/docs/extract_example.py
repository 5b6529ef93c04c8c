#!/usr/bin/env python3
"""Writes a worked example of docs/language.md (the first code block after
the marker line, 'A complete family file:' unless a third argument names
another) to the given path."""
import re
import sys

doc = open(sys.argv[1]).read()
marker = sys.argv[3] if len(sys.argv) > 3 else "A complete family file:"
m = re.search(re.escape(marker) + r"\n\n```\n(.*?)```", doc, re.S)
if not m:
    sys.exit("no worked example found")
open(sys.argv[2], "w").write(m.group(1))
