//===- WeightQuant.cpp - Which weights are quantized, and their sizes -----===//
//
// This file implements the classification of Linear weights and the byte
// counts of block-quantized storage. A weight is a Linear weight when a
// matmul reads it (directly, or one expert's slice of it) as its 2-D
// matrix; routers (whose product reaches `route`), single-output gates and
// params pinned to another dtype than the activations' stay float.
//
//===----------------------------------------------------------------------===//
#include "ir/WeightQuant.h"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <optional>
#include <regex>

namespace archc::ir {

std::string weightKey(const std::string &pattern, const TensorType &type) {
  return pattern + " " + type.str();
}

std::string quantFileTag(const QuantOptions &q, DType activations) {
  if (!q.enabled())
    return "";
  std::string tag = q.bits == 4 ? "q4" : "int8";
  if (activations == DType::F16)
    tag += "f16";
  else if (activations == DType::BF16)
    tag += "bf16";
  return tag;
}

std::string WeightScheme::describe() const {
  if (type == Type::Float) {
    if (blockRows > 0)
      return fmt::format("fp8 {}x{} blocks", blockRows, blockCols);
    return group == 0 ? "fp8 per tensor" : "fp8 per channel";
  }
  std::string g = group > 0    ? fmt::format("g{}", group)
                  : group == 0 ? std::string("per tensor")
                               : std::string("per row");
  return fmt::format("int{} {} {}{}", bits, g, symmetric ? "sym" : "asym",
                     needsGIdx ? " act-order" : "");
}

bool CheckpointQuant::ModuleRule::matches(const std::string &module) const {
  switch (match) {
  case Match::Any:
    return true;
  case Match::Exact:
    return module == pattern;
  case Match::Substring:
    return module.find(pattern) != std::string::npos;
  case Match::Regex: {
    // Compiled once per pattern (a model has thousands of modules).
    static std::map<std::string, std::optional<std::regex>> compiled;
    auto it = compiled.find(pattern);
    if (it == compiled.end()) {
      std::optional<std::regex> re;
      try {
        re.emplace(pattern);
      } catch (const std::regex_error &) {
        // Refused when the config is read.
      }
      it = compiled.emplace(pattern, std::move(re)).first;
    }
    return it->second &&
           std::regex_search(module, *it->second,
                             std::regex_constants::match_continuous);
  }
  }
  return false;
}

const WeightScheme *CheckpointQuant::schemeOf(const std::string &module,
                                              std::string *why) const {
  for (const ModuleRule &r : rules)
    if (r.matches(module)) {
      if (why)
        *why = r.origin;
      return r.quantized ? &r.scheme : nullptr;
    }
  if (why)
    *why = defaultQuantized ? "the config's defaults" : "no rule";
  return defaultQuantized ? &defaults : nullptr;
}

std::string CheckpointQuant::describe() const {
  switch (method) {
  case Method::None:
    return "no quantization_config";
  case Method::FP8: {
    std::string s = fmt::format("fp8 (e4m3, {}x{} blocks{})", blockRows,
                                blockCols, ue8m0 ? ", ue8m0 scales" : "");
    if (fp4Experts)
      s += ", fp4 routed experts";
    return s;
  }
  case Method::MXFP4:
    return "mxfp4";
  case Method::GPTQ:
    return fmt::format("gptq ({}, {})", gptqV1 ? "v1" : "v2",
                       defaults.describe());
  case Method::AWQ:
    return fmt::format("awq (gemm, {})", defaults.describe());
  case Method::CompressedTensors: {
    std::string groups;
    for (const ModuleRule &r : rules)
      if (r.quantized && groups.find(r.scheme.describe()) == std::string::npos)
        groups += (groups.empty() ? "" : ", ") + r.scheme.describe();
    return "compressed-tensors (" + groups + ")";
  }
  }
  return "?";
}

double QuantLayout::totalBytes() const {
  double perMatrix = static_cast<double>(codeBytesPerMatrix()) +
                     static_cast<double>(scalesPerMatrix()) * scaleBits / 8 +
                     static_cast<double>(rows * zeroPointBytesPerRow());
  return perMatrix * static_cast<double>(experts);
}

namespace {

int64_t constDim(const SymExpr &d) { return d.getConstant().value_or(0); }

/// Whether `v` reaches a route op's logits: walked backwards from every
/// route through the ops a router's product passes (casts, reshapes, the
/// bias add, scaling).
void collectRouterMatmuls(const Module &m, std::set<const Op *> &out) {
  std::function<void(const Value *, int)> back = [&](const Value *v,
                                                     int depth) {
    const Op *d = v->getDefiningOp();
    if (!d || depth > 8)
      return;
    switch (d->getKind()) {
    case OpKind::MatMul:
      out.insert(d);
      return;
    case OpKind::Cast:
    case OpKind::Reshape:
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
      for (const Value *o : d->operands)
        back(o, depth + 1);
      return;
    default:
      return;
    }
  };
  walk(m.graph.body, [&](const Op &op) {
    if (op.getKind() == OpKind::Route)
      back(op.getOperand(0), 0);
  });
}

const Op *paramOf(const Value *v, const Op **slice, const Op **reshape) {
  const Op *d = v->getDefiningOp();
  *slice = nullptr;
  *reshape = nullptr;
  if (d && d->getKind() == OpKind::ExpertSlice) {
    *slice = d;
    d = d->getOperand(0)->getDefiningOp();
    // A stack read through a Reshape that only splits the first dim
    // ([E * R, C] viewed [E, R, C]): the same rows, expert by expert.
    if (d && d->getKind() == OpKind::Reshape) {
      const Op *p = d->getOperand(0)->getDefiningOp();
      const TensorType &from = d->getOperand(0)->type;
      const TensorType &to = d->getResult()->type;
      bool split = p && p->getKind() == OpKind::Param && from.rank() == 2 &&
                   to.rank() == 3 && to.dims[2] == from.dims[1] &&
                   constDim(to.dims[0]) * constDim(to.dims[1]) ==
                       constDim(from.dims[0]) &&
                   constDim(from.dims[0]) > 0;
      if (!split)
        return nullptr;
      *reshape = d;
      d = p;
    }
  }
  return d && d->getKind() == OpKind::Param ? d : nullptr;
}

/// The declaration of a param op: its pattern (or, in the expanded IR, the
/// pattern that instantiates to its name) and its type.
const WeightDecl *declOf(const Module &m, const Op &param) {
  const std::string &name = param.attr<std::string>("name");
  const TensorType &type = param.getResult()->type;
  for (const WeightDecl &w : m.weights)
    if (w.type == type && w.pattern == name)
      return &w;
  for (const WeightDecl &w : m.weights)
    if (w.type == type)
      for (int64_t l : w.layers)
        if (instantiatePattern(w.pattern, l, -1) == name)
          return &w;
  return nullptr;
}

} // namespace

std::vector<LinearWeightUse> findLinearWeightUses(const Module &m) {
  std::set<const Op *> routers;
  collectRouterMatmuls(m, routers);
  std::vector<LinearWeightUse> out;
  walk(m.graph.body, [&](const Op &op) {
    if (op.getKind() != OpKind::MatMul || routers.count(&op))
      return;
    LinearWeightUse u;
    u.matmul = &op;
    u.param = paramOf(op.getOperand(1), &u.slice, &u.reshape);
    if (!u.param)
      return;
    const TensorType &w = op.getOperand(1)->type;
    const TensorType &stored =
        (u.reshape ? u.reshape : u.param)->getResult()->type;
    if (w.rank() != 2 || !isFloat(w.dtype) || w.dtype != m.activationDType)
      return;
    if (u.slice && stored.rank() != 3)
      return;
    u.inOut = !op.attr<bool>("transpose_b");
    u.rows = constDim(u.inOut ? w.dims[1] : w.dims[0]);
    u.cols = constDim(u.inOut ? w.dims[0] : w.dims[1]);
    u.experts = u.slice ? constDim(stored.dims[0]) : 1;
    if (u.rows <= 1 || u.cols <= 0 || u.experts <= 0)
      return;
    if (const WeightDecl *d = declOf(m, *u.param); d && d->pinnedDType)
      return;
    out.push_back(u);
  });
  return out;
}

std::vector<MlaWeightUse> findMlaWeightUses(const Module &m) {
  std::vector<MlaWeightUse> out;
  walk(m.graph.body, [&](const Op &op) {
    if (op.getKind() != OpKind::MlaAttention)
      return;
    const Op *p = op.getOperand(4)->getDefiningOp();
    const TensorType &w = op.getOperand(4)->type;
    if (!p || p->getKind() != OpKind::Param || w.rank() != 2 ||
        !isFloat(w.dtype) || w.dtype != m.activationDType)
      return;
    if (const WeightDecl *d = declOf(m, *p); d && d->pinnedDType)
      return;
    MlaWeightUse u;
    u.op = &op;
    u.param = p;
    const TensorType &q = op.getOperand(0)->type;
    u.heads = constDim(q.dims[2]);
    u.nope = constDim(q.dims[3]);
    u.v = op.attr<int64_t>("v_dim");
    u.latent = constDim(w.dims[1]);
    if (u.heads <= 0 || u.nope <= 0 || u.v <= 0 || u.latent <= 0 ||
        constDim(w.dims[0]) != u.heads * (u.nope + u.v))
      return;
    out.push_back(u);
  });
  return out;
}

std::vector<GroupedWeightUse> findGroupedWeightUses(const Module &m) {
  std::set<const Op *> routers;
  collectRouterMatmuls(m, routers);
  std::vector<GroupedWeightUse> out;
  walk(m.graph.body, [&](const Op &op) {
    if (op.getKind() != OpKind::MatMul || routers.count(&op) ||
        !op.attr<bool>("transpose_b"))
      return;
    const Op *r = op.getOperand(1)->getDefiningOp();
    if (!r || r->getKind() != OpKind::Reshape)
      return;
    const Op *p = r->getOperand(0)->getDefiningOp();
    const TensorType &from = r->getOperand(0)->type;
    const TensorType &to = r->getResult()->type;
    const TensorType &a = op.getOperand(0)->type;
    if (!p || p->getKind() != OpKind::Param || from.rank() != 2 ||
        to.rank() != 3 || a.rank() < 3 || !isFloat(to.dtype) ||
        to.dtype != m.activationDType)
      return;
    GroupedWeightUse u;
    u.matmul = &op;
    u.param = p;
    u.reshape = r;
    u.groups = constDim(to.dims[0]);
    u.rows = constDim(to.dims[1]);
    u.cols = constDim(to.dims[2]);
    // [G * R, K] split into G matrices [R, K]; the input's group axis
    // (third from last) matches.
    if (u.groups <= 0 || u.rows <= 1 || u.cols <= 0 ||
        to.dims[2] != from.dims[1] ||
        constDim(from.dims[0]) != u.groups * u.rows ||
        constDim(a.dims[a.rank() - 3]) != u.groups ||
        a.dims.back() != to.dims[2])
      return;
    if (const WeightDecl *d = declOf(m, *p); d && d->pinnedDType)
      return;
    out.push_back(u);
  });
  return out;
}

std::vector<FloatProjection>
findFloatProjections(const Module &m, const std::set<const Op *> &quantized) {
  std::set<const Op *> routers;
  collectRouterMatmuls(m, routers);
  std::vector<FloatProjection> out;
  walk(m.graph.body, [&](const Op &op) {
    // MLA's kv_b_proj expands the latent inside the attention op.
    bool mla = op.getKind() == OpKind::MlaAttention;
    if ((op.getKind() != OpKind::MatMul && !mla) || quantized.count(&op))
      return;
    // The weight: a param, possibly behind views of it.
    const Value *v = op.getOperand(mla ? 4 : 1);
    std::string through;
    const Op *d = v->getDefiningOp();
    for (int depth = 0; d && depth < 8 && d->getKind() != OpKind::Param;
         ++depth) {
      switch (d->getKind()) {
      case OpKind::Reshape:
      case OpKind::Transpose:
      case OpKind::Split:
      case OpKind::Slice:
      case OpKind::ExpertSlice:
      case OpKind::Cast:
        if (d->getKind() != OpKind::ExpertSlice || through.empty())
          through = d->getMnemonic();
        d = d->getOperand(0)->getDefiningOp();
        continue;
      default:
        d = nullptr;
      }
    }
    if (!d || d->getKind() != OpKind::Param || d->getResult()->type.rank() < 2)
      return;
    FloatProjection f;
    f.matmul = &op;
    const WeightDecl *w = declOf(m, *d);
    f.weight = w ? w->pattern : d->attr<std::string>("name");
    const TensorType &t = op.getOperand(mla ? 4 : 1)->type;
    if (mla)
      f.reason = "MLA's latent expansion (mla_attention reads it whole)";
    else if (routers.count(&op))
      f.reason = "a router: routing stays float";
    else if (w && w->pinnedDType)
      f.reason = "pinned to " + std::string(dtypeName(w->type.dtype));
    else if (!through.empty() && through != "expert_slice")
      f.reason = "read through a " + through;
    else if (t.rank() != 2 || !isFloat(t.dtype) || t.dtype != m.activationDType)
      f.reason = "not a 2-D matrix of the model's dtype";
    else
      f.reason = "its expert slice is read by another op too";
    out.push_back(std::move(f));
  });
  return out;
}

std::vector<const Op *> findEmbeddingGathers(const Module &m) {
  std::vector<const Op *> out;
  walk(m.graph.body, [&](const Op &op) {
    if (op.getKind() != OpKind::Gather)
      return;
    const Op *d = op.getOperand(0)->getDefiningOp();
    const TensorType &t = op.getOperand(0)->type;
    if (d && d->getKind() == OpKind::Param && t.rank() == 2 &&
        t.dtype == m.activationDType && isFloat(t.dtype)) {
      const WeightDecl *w = declOf(m, *d);
      if (!w || !w->pinnedDType)
        out.push_back(&op);
    }
  });
  return out;
}

WeightStorage computeWeightStorage(const Module &m, const QuantOptions &q) {
  WeightStorage s;
  // Per declaration: the quantized layout (if a quantized consumer reads
  // it) and whether a float consumer reads it too.
  std::map<const WeightDecl *, QuantLayout> quantized;
  std::map<const WeightDecl *, double> mlaStored;
  std::set<const Op *> quantParams, groupedReshapes;
  double scaleBits =
      q.scaleBits > 0 ? q.scaleBits : dtypeBits(m.activationDType);
  auto layoutFor = [&](int64_t rows, int64_t cols, int64_t experts) {
    QuantLayout l;
    l.bits = q.bits;
    l.block = q.block;
    l.rows = rows;
    l.cols = cols;
    l.experts = experts;
    l.symmetric = q.symmetric;
    l.scaleBits = scaleBits;
    return l;
  };
  if (q.enabled()) {
    // MLA's kv weight: U_K^T [H, c, nope] and U_V [H, v, c] per head.
    std::map<const WeightDecl *, double> mlaBytes;
    for (const MlaWeightUse &u : findMlaWeightUses(m)) {
      const WeightDecl *w = declOf(m, *u.param);
      if (!w)
        continue;
      mlaBytes[w] = layoutFor(u.latent, u.nope, u.heads).totalBytes() +
                    layoutFor(u.v, u.latent, u.heads).totalBytes();
      s.quantizedReaders.insert(u.op);
      quantParams.insert(u.param);
    }
    for (const GroupedWeightUse &u : findGroupedWeightUses(m)) {
      const WeightDecl *w = declOf(m, *u.param);
      if (!w)
        continue;
      quantized[w] = layoutFor(u.rows, u.cols, u.groups);
      s.quantizedReaders.insert(u.matmul);
      quantParams.insert(u.param);
      groupedReshapes.insert(u.reshape);
    }
    for (const auto &[w, bytes] : mlaBytes) {
      QuantLayout l = layoutFor(1, 1, 1);
      l.rows = 0; // bytes given directly (two layouts)
      quantized[w] = l;
      mlaStored[w] = bytes;
    }
    for (const LinearWeightUse &u : findLinearWeightUses(m)) {
      const WeightDecl *w = declOf(m, *u.param);
      if (!w)
        continue;
      quantized[w] = layoutFor(u.rows, u.cols, u.experts);
      s.quantizedReaders.insert(u.matmul);
      quantParams.insert(u.param);
    }
    if (q.embeddings)
      for (const Op *g : findEmbeddingGathers(m)) {
        const Op *p = g->getOperand(0)->getDefiningOp();
        const WeightDecl *w = declOf(m, *p);
        if (!w)
          continue;
        const TensorType &t = g->getOperand(0)->type;
        quantized[w] = layoutFor(constDim(t.dims[0]), constDim(t.dims[1]), 1);
        s.quantizedReaders.insert(g);
        quantParams.insert(p);
      }
  }
  // Float readers: any use of a param value by an op that is not one of
  // the quantized readers (expert slices and the Reshapes they read count
  // through their readers).
  std::set<const WeightDecl *> floatRead;
  std::set<const Op *> quantReshapes = groupedReshapes;
  if (q.enabled())
    for (const LinearWeightUse &u : findLinearWeightUses(m))
      if (u.reshape)
        quantReshapes.insert(u.reshape);
  walk(m.graph.body, [&](const Op &op) {
    if (s.quantizedReaders.count(&op) || quantReshapes.count(&op))
      return;
    for (const Value *v : op.operands) {
      const Op *d = v->getDefiningOp();
      if (!d || d->getKind() != OpKind::Param)
        continue;
      if (op.getKind() == OpKind::ExpertSlice && quantParams.count(d))
        continue; // read by the quantized matmuls of the expert body
      if (const WeightDecl *w = declOf(m, *d))
        floatRead.insert(w);
    }
  });
  for (const WeightDecl &w : m.weights) {
    WeightStorage::Forms f;
    double elements = static_cast<double>(constDim(w.type.numElements()));
    double instances = static_cast<double>(w.count());
    auto qi = quantized.find(&w);
    bool hasQuant = qi != quantized.end();
    // A declared weight no op reads is still written (as float).
    if (!hasQuant || floatRead.count(&w)) {
      f.floatBits = dtypeBits(w.type.dtype);
      f.bytes += elements * f.floatBits / 8 * instances;
    }
    if (hasQuant) {
      auto mla = mlaStored.find(&w);
      double bytes =
          mla != mlaStored.end() ? mla->second : qi->second.totalBytes();
      f.quantBits = elements > 0 ? bytes * 8 / elements : 0;
      f.bytes += bytes * instances;
    }
    s.totalBytes += f.bytes;
    s.byPattern[weightKey(w.pattern, w.type)] = f;
  }
  return s;
}

} // namespace archc::ir
