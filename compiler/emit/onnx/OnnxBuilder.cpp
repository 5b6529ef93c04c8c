//===- OnnxBuilder.cpp - Building ONNX graphs node by node ----------------===//
//
// This file implements GraphBuilder.
//
//===----------------------------------------------------------------------===//
#include "emit/onnx/OnnxBuilder.h"

#include "support/FloatConvert.h"

#include <cstring>

namespace archc {

int32_t onnxDType(const std::string &n) {
  if (n == "f32")
    return onnx::TensorProto_DataType_FLOAT;
  if (n == "f16")
    return onnx::TensorProto_DataType_FLOAT16;
  if (n == "bf16")
    return onnx::TensorProto_DataType_BFLOAT16;
  if (n == "f64")
    return onnx::TensorProto_DataType_DOUBLE;
  if (n == "i64")
    return onnx::TensorProto_DataType_INT64;
  if (n == "i32")
    return onnx::TensorProto_DataType_INT32;
  if (n == "i8")
    return onnx::TensorProto_DataType_INT8;
  if (n == "u8")
    return onnx::TensorProto_DataType_UINT8;
  if (n == "bool")
    return onnx::TensorProto_DataType_BOOL;
  return onnx::TensorProto_DataType_UNDEFINED;
}

std::string GraphBuilder::nodeInDomain(const std::string &domain,
                                       const std::string &op,
                                       const std::vector<std::string> &inputs,
                                       const std::vector<OnnxAttr> &attrs) {
  std::vector<std::string> ins = inputs;
  while (!ins.empty() && ins.back().empty())
    ins.pop_back(); // trailing omitted optional inputs
  std::string out = nodeN(op, ins, attrs, 1)[0];
  graph->mutable_node(graph->node_size() - 1)->set_domain(domain);
  return out;
}

std::string GraphBuilder::fresh(const std::string &hint) {
  return prefix + (hint.empty() ? std::string("t") : hint) + "_" +
         std::to_string(counter++);
}

std::vector<std::string>
GraphBuilder::nodeN(const std::string &op,
                    const std::vector<std::string> &inputs,
                    const std::vector<OnnxAttr> &attrs, size_t outputs,
                    const std::string &hint) {
  onnx::NodeProto *n = graph->add_node();
  n->set_op_type(op);
  std::string base = fresh(hint.empty() ? op : hint);
  n->set_name(base);
  for (const std::string &in : inputs)
    n->add_input(in);
  std::vector<std::string> outs;
  for (size_t i = 0; i < outputs; ++i) {
    std::string o = outputs == 1 ? base : base + "_" + std::to_string(i);
    n->add_output(o);
    outs.push_back(o);
  }
  for (const OnnxAttr &a : attrs) {
    onnx::AttributeProto *p = n->add_attribute();
    p->set_name(a.name);
    switch (a.kind) {
    case OnnxAttr::Int:
      p->set_type(onnx::AttributeProto_AttributeType_INT);
      p->set_i(a.i);
      break;
    case OnnxAttr::Float:
      p->set_type(onnx::AttributeProto_AttributeType_FLOAT);
      p->set_f(a.f);
      break;
    case OnnxAttr::Ints:
      p->set_type(onnx::AttributeProto_AttributeType_INTS);
      for (int64_t v : a.ints)
        p->add_ints(v);
      break;
    case OnnxAttr::Floats:
      p->set_type(onnx::AttributeProto_AttributeType_FLOATS);
      for (float v : a.floats)
        p->add_floats(v);
      break;
    case OnnxAttr::String:
      p->set_type(onnx::AttributeProto_AttributeType_STRING);
      p->set_s(a.s);
      break;
    case OnnxAttr::Graph:
      p->set_type(onnx::AttributeProto_AttributeType_GRAPH);
      *p->mutable_g() = *a.g;
      break;
    }
  }
  return outs;
}

std::string GraphBuilder::node(const std::string &op,
                               const std::vector<std::string> &inputs,
                               const std::vector<OnnxAttr> &attrs,
                               const std::string &hint) {
  return nodeN(op, inputs, attrs, 1, hint)[0];
}

void GraphBuilder::nodeNamed(const std::string &op,
                             const std::vector<std::string> &inputs,
                             const std::string &output,
                             const std::vector<OnnxAttr> &attrs) {
  std::string tmp = node(op, inputs, attrs);
  onnx::NodeProto *n = graph->mutable_node(graph->node_size() - 1);
  n->set_output(0, output);
  (void)tmp;
}

std::string GraphBuilder::raw(const std::string &bytes, int32_t dtype,
                              const std::vector<int64_t> &shape,
                              const std::string &hint) {
  std::string key = std::to_string(dtype) + ":";
  for (int64_t d : shape)
    key += std::to_string(d) + ",";
  key += ":" + bytes;
  auto it = constCache.find(key);
  if (it != constCache.end())
    return it->second;
  onnx::NodeProto *n = graph->add_node();
  n->set_op_type("Constant");
  std::string name = fresh(hint.empty() ? "const" : hint);
  n->set_name(name);
  n->add_output(name);
  onnx::AttributeProto *a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto_AttributeType_TENSOR);
  onnx::TensorProto *t = a->mutable_t();
  t->set_data_type(dtype);
  for (int64_t d : shape)
    t->add_dims(d);
  t->set_raw_data(bytes);
  constCache[key] = name;
  return name;
}

std::string GraphBuilder::i64(const std::vector<int64_t> &values) {
  std::string bytes(values.size() * 8, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return raw(bytes, onnx::TensorProto_DataType_INT64,
             {static_cast<int64_t>(values.size())}, "i64");
}

std::string GraphBuilder::i32(const std::vector<int32_t> &values) {
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return raw(bytes, onnx::TensorProto_DataType_INT32,
             {static_cast<int64_t>(values.size())}, "i32");
}

std::string GraphBuilder::i64Scalar(int64_t v) {
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &v, 8);
  return raw(bytes, onnx::TensorProto_DataType_INT64, {}, "i64");
}

std::string GraphBuilder::f32(const std::vector<float> &values,
                              const std::vector<int64_t> &shape) {
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return raw(bytes, onnx::TensorProto_DataType_FLOAT, shape, "f32");
}

std::string GraphBuilder::f32Scalar(float v) { return f32({v}, {}); }

std::string GraphBuilder::scalar(double v, int32_t dtype) {
  std::string bytes;
  switch (dtype) {
  case onnx::TensorProto_DataType_FLOAT: {
    float f = static_cast<float>(v);
    bytes.assign(reinterpret_cast<const char *>(&f), 4);
    break;
  }
  case onnx::TensorProto_DataType_FLOAT16: {
    uint16_t h = floatToHalf(static_cast<float>(v));
    bytes.assign(reinterpret_cast<const char *>(&h), 2);
    break;
  }
  case onnx::TensorProto_DataType_BFLOAT16: {
    uint16_t h = floatToBf16(static_cast<float>(v));
    bytes.assign(reinterpret_cast<const char *>(&h), 2);
    break;
  }
  case onnx::TensorProto_DataType_DOUBLE:
    bytes.assign(reinterpret_cast<const char *>(&v), 8);
    break;
  case onnx::TensorProto_DataType_INT64: {
    int64_t i = static_cast<int64_t>(v);
    bytes.assign(reinterpret_cast<const char *>(&i), 8);
    break;
  }
  case onnx::TensorProto_DataType_INT32: {
    int32_t i = static_cast<int32_t>(v);
    bytes.assign(reinterpret_cast<const char *>(&i), 4);
    break;
  }
  case onnx::TensorProto_DataType_BOOL: {
    char b = v != 0;
    bytes.assign(&b, 1);
    break;
  }
  default: {
    float f = static_cast<float>(v);
    bytes.assign(reinterpret_cast<const char *>(&f), 4);
    dtype = onnx::TensorProto_DataType_FLOAT;
  }
  }
  return raw(bytes, dtype, {}, "c");
}

} // namespace archc

namespace archc {

GraphBuilder::Target GraphBuilder::retarget(onnx::GraphProto &g,
                                            std::string subPrefix) {
  Target saved{graph, prefix, constCache};
  graph = &g;
  prefix = std::move(subPrefix);
  return saved;
}

void GraphBuilder::restore(Target saved) {
  graph = saved.graph;
  prefix = std::move(saved.prefix);
  constCache = std::move(saved.constCache);
}

void addGraphInput(onnx::GraphProto &g, const std::string &name, int32_t type) {
  onnx::ValueInfoProto *vi = g.add_input();
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(type);
}

void addGraphOutput(onnx::GraphProto &g, const std::string &name,
                    int32_t type) {
  onnx::ValueInfoProto *vi = g.add_output();
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(type);
}

} // namespace archc
