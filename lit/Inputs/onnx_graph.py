#!/usr/bin/env python3
"""Prints an ONNX model's node counts and initializers.

Usage: onnx_graph.py ops MODEL.onnx      node count per op type, subgraphs
                                         (Scan/Loop/If bodies) included, then
                                         the total
       onnx_graph.py inits MODEL.onnx    one line per initializer: its name
                                         and dims
"""
import collections
import sys

import onnx


def count(graph, counts):
    for node in graph.node:
        counts[node.op_type] += 1
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                count(a.g, counts)
            for g in a.graphs:
                count(g, counts)


def main():
    what, path = sys.argv[1], sys.argv[2]
    m = onnx.load(path, load_external_data=False)
    if what == "ops":
        counts = collections.Counter()
        count(m.graph, counts)
        for op in sorted(counts):
            print(op, counts[op])
        print("total", sum(counts.values()))
    else:
        for t in m.graph.initializer:
            print(t.name, list(t.dims))


if __name__ == "__main__":
    main()
