#!/usr/bin/env python3
"""Writes the worked example of docs/language.md (the first code block after
'A complete family file:') to the given path."""
import re
import sys

doc = open(sys.argv[1]).read()
m = re.search(r"A complete family file:\n\n```\n(.*?)```", doc, re.S)
if not m:
    sys.exit("no worked example found")
open(sys.argv[2], "w").write(m.group(1))
