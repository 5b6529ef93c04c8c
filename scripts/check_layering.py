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
# libraries link along the same edges (compiler/CMakeLists.txt). The ONNX
# back end's folders are layers of their own: emit/onnx (graphs) <-
# emit/weights (how weights are stored, their bytes) <- emit/lowering (IR
# ops to ONNX) <- emit/package (the files of an emission).
ALLOWED = {
    "support": set(),
    "ir": {"support"},
    "config": {"support"},
    "frontend": {"support", "ir"},
    "irgen": {"support", "ir", "config", "frontend"},
    "passes": {"support", "ir"},
    "analysis": {"support", "ir"},
    "checkpoint": {"support", "ir"},
    "emit/onnx": {"support", "ir"},
    "emit/weights": {"support", "ir", "checkpoint", "emit/onnx"},
    "emit/lowering": {"support", "ir", "checkpoint", "emit/onnx",
                      "emit/weights"},
    "emit/package": {"support", "ir", "checkpoint", "emit/onnx",
                     "emit/weights", "emit/lowering"},
    "driver": {"support", "ir", "config", "frontend", "irgen", "passes",
               "analysis", "checkpoint", "emit/package"},
    # Build-time tools (the AST snapshot writer).
    "tools": {"support", "ir", "frontend"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(parts):
    """The layer of a path's components: its folder, emit's subfolder."""
    if parts[0] == "emit" and len(parts) > 2:
        return "emit/" + parts[1]
    return parts[0]


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
            layer = layer_of(rel.split(os.sep))
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
                    tlayer = layer_of(target.split("/"))
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
