//===- Structure.cpp - Leaves and control ops -----------------------------===//
//
// This file defines the param/const/state_in leaves and the control ops
// (repeat, yield, state_out, return). The compiler creates them (they are
// not `op.*` of the language); their types are set when they are created
// (leaves) or by the pass that walks regions (repeat). They cost nothing.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

#include <algorithm>

namespace archc::ir {

namespace {
bool verifyNamedLeaf(const Op &op, DiagnosticEngine &d) {
  if (op.attr<std::string>("name").empty() || !op.getResult()->type.known) {
    reportOpError(d, op, "needs a name and a declared type");
    return false;
  }
  return true;
}

bool verifyStateOut(const Op &op, DiagnosticEngine &d) {
  if (op.attr<std::string>("name").empty()) {
    reportOpError(d, op, "needs a name");
    return false;
  }
  return true;
}

bool verifyRepeat(const Op &op, DiagnosticEngine &d) {
  std::vector<int64_t> all;
  for (const auto &r : op.getRegions()) {
    if (r->getArguments().size() != op.getNumOperands()) {
      reportOpError(d, op, "each layer kind takes the carried values");
      return false;
    }
    const Op *t = r->getTerminator();
    if (!t || t->getKind() != OpKind::Yield ||
        t->getNumOperands() != op.getNumResults()) {
      reportOpError(d, op, "each layer kind must yield the carried values");
      return false;
    }
    all.insert(all.end(), r->layers.begin(), r->layers.end());
  }
  std::sort(all.begin(), all.end());
  int64_t begin = op.attr<int64_t>("begin"), end = op.attr<int64_t>("end");
  bool covered = static_cast<int64_t>(all.size()) == end - begin;
  for (size_t i = 0; covered && i < all.size(); ++i)
    covered = all[i] == begin + static_cast<int64_t>(i);
  if (!covered) {
    reportOpError(d, op,
                  fmt::format("layer kinds must cover layers {}..{} exactly "
                              "once",
                              begin, end));
    return false;
  }
  return true;
}
} // namespace

void addStructureSchemas(SchemaList &out) {
  out.push_back(SchemaBuilder(OpKind::Param, "a checkpoint weight")
                    .builderAttr("name", AttrType::String,
                                 "the weight's name pattern ({i}, {e})")
                    .result("result", "the weight's declared type")
                    .verify(verifyNamedLeaf)
                    .denseResults()
                    .take());
  out.push_back(SchemaBuilder(OpKind::Const, "a scalar constant")
                    .builderAttr("value", AttrType::Float, "the value")
                    .result("result", "a rank-0 tensor")
                    .denseResults()
                    .take());
  out.push_back(SchemaBuilder(OpKind::StateIn,
                              "a per-layer decode-time state graph input")
                    .builderAttr("name", AttrType::String,
                                 "the graph input's name pattern")
                    .result("result", "the past state")
                    .verify(verifyNamedLeaf)
                    .denseResults()
                    .take());
  out.push_back(
      SchemaBuilder(OpKind::Repeat, "the layer loop over layer kinds")
          .describe("One region per layer kind (identical layer bodies), "
                    "each tagged with the layers it serves; the operands are "
                    "the values carried from layer to layer.")
          .variadicOperand("inits", "the carried values' initial values",
                           Origin::Builder)
          .builderAttr("var", AttrType::String, "the layer index variable")
          .builderAttr("begin", AttrType::Int, "first layer")
          .builderAttr("end", AttrType::Int, "one past the last layer")
          .repeatedRegion("layer_kinds", "one per distinct layer body")
          .resultPerOperand("results", "the carried values after the last "
                                       "layer")
          .verify(verifyRepeat)
          .denseResults()
          .take());
  out.push_back(
      SchemaBuilder(OpKind::Yield, "ends a region with its values")
          .variadicOperand("values", "the region's results", Origin::Builder)
          .take());
  out.push_back(SchemaBuilder(OpKind::StateOut,
                              "a per-layer decode-time state graph output")
                    .operand("value", "the present state")
                    .builderAttr("name", AttrType::String,
                                 "the graph output's name pattern")
                    .verify(verifyStateOut)
                    .take());
  out.push_back(
      SchemaBuilder(OpKind::Return, "the graph's outputs")
          .variadicOperand("values", "the graph outputs", Origin::Builder)
          .take());
}

} // namespace archc::ir
