#!/usr/bin/env bash
# Regenerates the op reference in docs/ir.md from the op schemas
# (`archc --print-op-reference`), between its op-reference markers.
# Usage: scripts/update_op_reference.sh [path/to/archc]
set -euo pipefail
cd "$(dirname "$0")/.."
archc="${1:-build/bin/archc}"
ref="$("$archc" --print-op-reference)"
REF="$ref" /usr/bin/python3 - <<'PY'
import os
p = "docs/ir.md"
s = open(p).read()
begin, end = "<!-- op-reference:begin -->\n", "<!-- op-reference:end -->"
a, b = s.index(begin) + len(begin), s.index(end)
open(p, "w").write(s[:a] + os.environ["REF"] + "\n" + s[b:])
PY
