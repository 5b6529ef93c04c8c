//===- OnnxGraphUtil.h - Building ONNX graphs in unit tests -----*- C++ -*-===//
//
// Hand-built ONNX graphs for the tests of the graph clean-ups.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_TESTS_ONNXGRAPHUTIL_H
#define ARCHC_TESTS_ONNXGRAPHUTIL_H

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace archc::test {

/// Appends a node of `op` reading `ins` and writing `outs` to `g`.
inline onnx::NodeProto *addNode(onnx::GraphProto &g, const std::string &op,
                                std::vector<std::string> ins,
                                std::vector<std::string> outs) {
  onnx::NodeProto *n = g.add_node();
  n->set_op_type(op);
  for (auto &i : ins)
    n->add_input(i);
  for (auto &o : outs)
    n->add_output(o);
  return n;
}

} // namespace archc::test

#endif // ARCHC_TESTS_ONNXGRAPHUTIL_H
