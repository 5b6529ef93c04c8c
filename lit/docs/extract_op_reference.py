#!/usr/bin/env python3
"""Prints the op reference section of docs/ir.md (between its markers)."""
import sys
s = open(sys.argv[1]).read()
begin, end = "<!-- op-reference:begin -->\n", "<!-- op-reference:end -->"
sys.stdout.write(s[s.index(begin) + len(begin):s.index(end)].rstrip("\n") + "\n")
