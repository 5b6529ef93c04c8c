//===- OnnxBuilder.h - Building ONNX graphs node by node --------*- C++ -*-===//
//
// This file declares GraphBuilder, a thin helper over onnx::GraphProto that
// creates uniquely named nodes and constants. Every op the lowering emits
// goes through it.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_ONNXBUILDER_H
#define ARCHC_EMIT_ONNXBUILDER_H

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace archc {

/// An attribute for GraphBuilder::node.
struct OnnxAttr {
  enum Kind { Int, Float, Ints, String, Floats, Graph };
  std::string name;
  Kind kind = Int;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::string s;
  std::shared_ptr<onnx::GraphProto> g;

  static OnnxAttr integer(std::string n, int64_t v) {
    OnnxAttr a;
    a.name = std::move(n);
    a.kind = Int;
    a.i = v;
    return a;
  }
  static OnnxAttr real(std::string n, float v) {
    OnnxAttr a;
    a.name = std::move(n);
    a.kind = Float;
    a.f = v;
    return a;
  }
  static OnnxAttr list(std::string n, std::vector<int64_t> v) {
    OnnxAttr a;
    a.name = std::move(n);
    a.kind = Ints;
    a.ints = std::move(v);
    return a;
  }
  static OnnxAttr graph(std::string n, onnx::GraphProto body) {
    OnnxAttr a;
    a.name = std::move(n);
    a.kind = Graph;
    a.g = std::make_shared<onnx::GraphProto>(std::move(body));
    return a;
  }
  static OnnxAttr str(std::string n, std::string v) {
    OnnxAttr a;
    a.name = std::move(n);
    a.kind = String;
    a.s = std::move(v);
    return a;
  }
};

class GraphBuilder {
public:
  /// Builds into `g`; generated names start with `prefix` (subgraphs use
  /// one so their names never collide with the outer graph's).
  explicit GraphBuilder(onnx::GraphProto &g, std::string prefix = "")
      : graph(&g), prefix(std::move(prefix)) {}

  /// Adds a node; returns its output names (`outputs` of them).
  std::vector<std::string> nodeN(const std::string &op,
                                 const std::vector<std::string> &inputs,
                                 const std::vector<OnnxAttr> &attrs,
                                 size_t outputs, const std::string &hint = "");
  /// Adds a single-output node.
  std::string node(const std::string &op,
                   const std::vector<std::string> &inputs,
                   const std::vector<OnnxAttr> &attrs = {},
                   const std::string &hint = "");
  /// Adds a single-output node of an operator domain other than the
  /// default (`com.microsoft` contrib ops); "" inputs are omitted optional
  /// inputs.
  std::string nodeInDomain(const std::string &domain, const std::string &op,
                           const std::vector<std::string> &inputs,
                           const std::vector<OnnxAttr> &attrs = {});
  /// Adds a node whose (single) output has a given name.
  void nodeNamed(const std::string &op, const std::vector<std::string> &inputs,
                 const std::string &output,
                 const std::vector<OnnxAttr> &attrs = {});

  /// Constants (Constant nodes). Cached by value.
  std::string i64(const std::vector<int64_t> &values);
  /// An int32 vector constant (a Gather's indices: half the bytes of i64).
  std::string i32(const std::vector<int32_t> &values);
  std::string i64Scalar(int64_t v);
  std::string f32(const std::vector<float> &values,
                  const std::vector<int64_t> &shape);
  std::string f32Scalar(float v);
  /// A rank-0 constant of element type `dtype` (onnx enum).
  std::string scalar(double v, int32_t dtype);
  /// A constant tensor from raw little-endian bytes.
  std::string raw(const std::string &bytes, int32_t dtype,
                  const std::vector<int64_t> &shape, const std::string &hint);

  std::string fresh(const std::string &hint);
  onnx::GraphProto &proto() { return *graph; }
  size_t numNodes() const { return static_cast<size_t>(graph->node_size()); }

  /// Where nodes go: the graph, the name prefix and the constants defined
  /// so far (all visible from a subgraph of that graph).
  struct Target {
    onnx::GraphProto *graph;
    std::string prefix;
    std::map<std::string, std::string> constCache;
  };
  /// Sends the following nodes into the subgraph `g` (names prefixed with
  /// `subPrefix`; outer constants stay usable); returns the state to
  /// restore() once the subgraph is complete. Names stay unique across both
  /// (one counter).
  Target retarget(onnx::GraphProto &g, std::string subPrefix);
  /// Returns to the graph retarget() left; constants the subgraph defined
  /// are forgotten (they are not visible outside it).
  void restore(Target saved);

private:
  onnx::GraphProto *graph;
  std::string prefix;
  size_t counter = 0;
  std::map<std::string, std::string> constCache;
};

/// onnx::TensorProto_DataType for an archc dtype name (f32, f16, bf16, i64,
/// bool, ...).
int32_t onnxDType(const std::string &archcName);

/// Declares a tensor input / output `name` of element type `type` (no shape)
/// on a subgraph (a Scan or Loop body).
void addGraphInput(onnx::GraphProto &g, const std::string &name, int32_t type);
void addGraphOutput(onnx::GraphProto &g, const std::string &name, int32_t type);

} // namespace archc

#endif // ARCHC_EMIT_ONNXBUILDER_H
