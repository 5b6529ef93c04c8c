#!/usr/bin/env python3
"""Checks that compiler/ is layered as docs/ir.md ("Layers") states: every
`#include "dir/file.h"` of a layer names its own layer or one below it, and
no file includes itself through a chain (no include cycles).

Usage: check_layering.py [compiler-dir]   (exit 1 and a list on violations)
"""
import os
import re
import sys

# Each layer and the layers it may include (besides itself). The CMake
# libraries link along the same edges (compiler/CMakeLists.txt).
ALLOWED = {
    "support": set(),
    "ir": {"support"},
    "config": {"support"},
    "frontend": {"support", "ir"},
    "irgen": {"support", "ir", "config", "frontend"},
    "passes": {"support", "ir"},
    "analysis": {"support", "ir"},
    "emit": {"support", "ir"},
    "driver": {"support", "ir", "config", "frontend", "irgen", "passes",
               "analysis", "emit"},
    # Build-time tools (the AST snapshot writer).
    "tools": {"support", "ir", "frontend"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "compiler")
    root = os.path.abspath(root)
    problems = []
    graph = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith((".h", ".cpp", ".def")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            layer = rel.split(os.sep)[0]
            if layer not in ALLOWED:
                problems.append(f"{rel}: directory '{layer}' is not a known layer")
                continue
            deps = []
            with open(path, encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = m.group(1)
                    deps.append(target)
                    tlayer = target.split("/")[0]
                    if tlayer not in ALLOWED:
                        continue  # generated or third-party headers
                    if tlayer != layer and tlayer not in ALLOWED[layer]:
                        problems.append(f"{rel}:{n}: {layer} includes "
                                        f"{target} from the higher layer "
                                        f"'{tlayer}'")
            graph[rel.replace(os.sep, "/")] = deps
    # Include cycles among the project's own files.
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for dep in graph.get(node, []):
            if dep not in graph:
                continue
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                problems.append("include cycle: " + " -> ".join(cycle))
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"layering: {len(graph)} files, no upward include, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
