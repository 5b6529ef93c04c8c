//===- Evaluator.cpp - Compile-time evaluation of .arch code --------------===//
//
// The evaluator's state and its IR helpers (ops, constants, weights). The
// evaluation itself is split by job: EvalStatements.cpp (statements),
// EvalLayerLoop.cpp (layer loops and their memoised layer kinds),
// EvalExpressions.cpp (expressions), EvalArithmetic.cpp (operators),
// EvalCalls.cpp (calls and def inlining), EvalConversions.cpp (values as
// types and attributes), OpBuiltins.cpp (op.* calls), with LayerKeys.cpp
// finding what makes one layer differ from another.
//
//===----------------------------------------------------------------------===//
#include "irgen/Evaluator.h"

#include <fmt/format.h>

namespace archc {

using ir::OpKind;

Evaluator::Evaluator(const Program &program, DiagnosticEngine &diags,
                     ir::Module &module)
    : program(program), diags(diags), module(module) {}

Diagnostic &Evaluator::error(SourceRange r, const std::string &msg) {
  Diagnostic &d = diags.error(r, msg);
  for (const ir::InlineFrame *f = frame.get(); f; f = f->parent.get())
    d.notes.push_back(
        {f->callSite, "in call to '" + f->callee + "' from here"});
  return d;
}

//===----------------------------------------------------------------------===//
// IR helpers
//===----------------------------------------------------------------------===//

ir::Op *Evaluator::createOp(OpKind kind, std::vector<ir::Value *> operands,
                            SourceRange range, unsigned numResults) {
  auto op = std::make_unique<ir::Op>(kind, ir::Location{range, frame});
  op->operands = std::move(operands);
  for (unsigned i = 0; i < numResults; ++i)
    op->addResult();
  return block->push(std::move(op));
}

ir::Value *Evaluator::constant(double value, SourceRange range) {
  ir::Op *op = createOp(OpKind::Const, {}, range);
  op->setAttr("value", value);
  op->getResult()->type = ir::TensorType(module.activationDType, {});
  return op->getResult();
}

ir::Value *Evaluator::asTensor(const EvalValue &v, SourceRange range) {
  if (v.isTensor())
    return v.getTensor();
  if (v.isNumber())
    return constant(v.getNumber(), range);
  if (v.getKind() == EvalValue::Kind::Bool)
    return constant(v.getBool() ? 1.0 : 0.0, range);
  if (!v.isPoison())
    error(range,
          fmt::format("expected a tensor or a number, got {}", v.typeName()));
  return nullptr;
}

std::string Evaluator::currentScope() const {
  std::string s;
  for (const std::string &p : scopes) {
    if (p.empty())
      continue;
    if (!s.empty())
      s += ".";
    s += p;
  }
  return s;
}

EvalValue Evaluator::declareParam(const std::string &name,
                                  const std::vector<EvalValue> &shape,
                                  ir::DType dtype, SourceRange range,
                                  bool pinnedDType, bool buffer) {
  std::string prefix = currentScope();
  std::string pattern = prefix.empty() ? name : prefix + "." + name;
  if (name.empty()) {
    error(range, "weight name must not be empty");
    return EvalValue::poison();
  }
  std::vector<ir::SymExpr> dims;
  for (const EvalValue &d : shape) {
    if (d.isPoison())
      return EvalValue::poison();
    if (!d.isInt()) {
      error(range, fmt::format("weight '{}': every dim must be an int known "
                               "from the config, got {}",
                               pattern, d.typeName()));
      return EvalValue::poison();
    }
    if (d.getInt() <= 0) {
      error(range, fmt::format("weight '{}': dim {} must be positive", pattern,
                               d.getInt()));
      return EvalValue::poison();
    }
    dims.push_back(d.getInt());
  }
  // No real checkpoint tensor comes near 2^48 elements; larger products
  // come from a wrong config and would overflow size arithmetic later.
  constexpr int64_t kMaxElements = int64_t(1) << 48;
  int64_t elements = 1;
  for (const ir::SymExpr &d : dims) {
    int64_t v = *d.getConstant();
    if (__builtin_mul_overflow(elements, v, &elements) ||
        elements > kMaxElements) {
      error(range, fmt::format("weight '{}' would have more than 2^48 "
                               "elements; check the config's sizes",
                               pattern));
      return EvalValue::poison();
    }
  }
  bool hasLayer = pattern.find("{i}") != std::string::npos;
  bool hasExpert = pattern.find("{e}") != std::string::npos;
  if (hasLayer && !layer) {
    error(range, fmt::format("weight '{}' uses '{{i}}' outside a layer loop",
                             pattern));
    return EvalValue::poison();
  }
  if (hasExpert && !expertCount) {
    error(range, fmt::format("weight '{}' uses '{{e}}' outside an expert body",
                             pattern));
    return EvalValue::poison();
  }
  // Duplicate detection: per concrete layer (or once without {i}).
  int64_t key = hasLayer ? *layer : -1;
  auto [it, inserted] = declared.emplace(std::make_pair(pattern, key), range);
  if (!inserted) {
    Diagnostic &d = diags.error(
        range, layer && !hasLayer
                   ? fmt::format("weight '{}' is declared again in layer {}: "
                                 "weights inside a layer loop need '{{i}}' in "
                                 "their scope",
                                 pattern, *layer)
                   : fmt::format("weight '{}' is declared twice", pattern));
    d.notes.push_back({it->second, "first declared here"});
    for (const ir::InlineFrame *f = frame.get(); f; f = f->parent.get())
      d.notes.push_back(
          {f->callSite, "in call to '" + f->callee + "' from here"});
    return EvalValue::poison();
  }
  ir::TensorType type(dtype, dims);
  // Register (or extend) the declaration with this layer.
  size_t declIndex = SIZE_MAX;
  for (size_t idx : weightIndex[pattern])
    if (module.weights[idx].type == type)
      declIndex = idx;
  if (declIndex == SIZE_MAX) {
    ir::WeightDecl w;
    w.pattern = pattern;
    w.type = type;
    w.experts = hasExpert ? expertCount : 0;
    w.loc = range;
    module.weights.push_back(w);
    declIndex = module.weights.size() - 1;
    weightIndex[pattern].push_back(declIndex);
  }
  if (hasLayer)
    module.weights[declIndex].layers.push_back(*layer);
  module.weights[declIndex].pinnedDType |= pinnedDType;
  module.weights[declIndex].buffer |= buffer;
  ir::Op *op = createOp(OpKind::Param, {}, range);
  op->setAttr("name", pattern);
  op->getResult()->type = type;
  return EvalValue::tensor(op->getResult());
}

} // namespace archc

namespace archc {

namespace {
/// Expert bodies the back ends expand: each op.experts' count times the
/// layers of the region it is in. At most kMaxLayers x kMaxExperts per op.
/// `where`: the first such op.
int64_t expertInstances(const ir::Block &b, int64_t layers,
                        const ir::Op *&where) {
  int64_t n = 0;
  for (const auto &op : b.getOps()) {
    if (op->getKind() == ir::OpKind::Experts) {
      n += op->attr<int64_t>("count") * layers;
      if (!where)
        where = op.get();
    }
    for (const auto &region : op->getRegions())
      n += expertInstances(*region,
                           region->layers.empty()
                               ? layers
                               : static_cast<int64_t>(region->layers.size()),
                           where);
  }
  return n;
}
} // namespace

bool Evaluator::checkModelSize() {
  int64_t tensors = 0, params = 0;
  for (const ir::WeightDecl &w : module.weights) {
    int64_t elements = 1;
    for (const ir::SymExpr &d : w.type.dims)
      elements *= d.getConstant().value_or(1); // <= 2^48 (declareParam)
    // count() <= kMaxLayers x kMaxExperts and elements <= 2^48, so only
    // the product can overflow.
    int64_t n = w.count(), p = 0;
    bool over = __builtin_mul_overflow(elements, n, &p) ||
                __builtin_add_overflow(params, p, &params) ||
                params > kMaxParams;
    tensors += n;
    if (tensors > kMaxTensors) {
      error(w.loc, fmt::format("the model would have more than {} weight "
                               "tensors (the limit); check the config's "
                               "layer and expert counts",
                               kMaxTensors));
      return false;
    }
    if (over) {
      error(w.loc, fmt::format("the model would have more than 2^50 "
                               "parameters (the limit); check the config's "
                               "sizes"));
      return false;
    }
  }
  const ir::Op *experts = nullptr;
  int64_t bodies = expertInstances(module.graph.body, 1, experts);
  if (bodies > kMaxExpertInstances) {
    error(experts->getLoc().range,
          fmt::format("the model would have {} expert bodies (experts x "
                      "layers), more than the limit of {}; check the config's "
                      "layer and expert counts",
                      bodies, kMaxExpertInstances));
    return false;
  }
  return true;
}

} // namespace archc
