#!/usr/bin/env python3
"""Prints an ONNX model's node counts and initializers.

Usage: onnx_graph.py ops MODEL.onnx      node count per op type, subgraphs
                                         (Scan/Loop/If bodies) included, then
                                         the total
       onnx_graph.py inits MODEL.onnx    one line per initializer: its name
                                         and dims
       onnx_graph.py experts MODEL.onnx  per Scan (an expert dispatch): the top-level
                                         nodes only the dispatch reads (from
                                         the router's TopK to the Reshape
                                         of the Scan's output) and the
                                         body's nodes, with their op types
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


def outer_refs(graph):
    """Names a subgraph reads that it does not define."""
    defined = {i.name for i in graph.input}
    refs = []
    for node in graph.node:
        refs += [x for x in node.input if x and x not in defined]
        defined.update(node.output)
    return refs


def experts(graph):
    """One line per Scan: its dispatch's top-level nodes, then its body's."""
    consumers = collections.defaultdict(list)
    producer = {}
    for node in graph.node:
        for x in node.input:
            consumers[x].append(node)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                for x in outer_refs(a.g):
                    consumers[x].append(node)
        for y in node.output:
            producer[y] = node
    for scan in (n for n in graph.node if n.op_type == "Scan"):
        # Producers every consumer of which is already in the dispatch,
        # up to (not including) the router's TopK.
        part = {id(scan): scan}
        work = list(scan.input) + outer_refs(scan.attribute[0].g)
        while work:
            node = producer.get(work.pop())
            if node is None or id(node) in part or node.op_type == "TopK":
                continue
            if all(id(c) in part for y in node.output for c in consumers[y]):
                part[id(node)] = node
                work += list(node.input)
        for c in consumers[scan.output[0]]:
            if c.op_type == "Reshape":
                part[id(c)] = c
        outer = collections.Counter(n.op_type for n in part.values())
        body = collections.Counter(n.op_type for n in scan.attribute[0].g.node)
        print("outer %d: %s | body %d: %s" % (
            sum(outer.values()),
            " ".join("%s %d" % kv for kv in sorted(outer.items())),
            sum(body.values()),
            " ".join("%s %d" % kv for kv in sorted(body.items()))))


def main():
    what, path = sys.argv[1], sys.argv[2]
    m = onnx.load(path, load_external_data=False)
    if what == "ops":
        counts = collections.Counter()
        count(m.graph, counts)
        for op in sorted(counts):
            print(op, counts[op])
        print("total", sum(counts.values()))
    elif what == "experts":
        experts(m.graph)
    else:
        for t in m.graph.initializer:
            print(t.name, list(t.dims))


if __name__ == "__main__":
    main()
