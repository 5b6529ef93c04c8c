//===- Profile.cpp - Parameters, work and traffic of a model --------------===//
//
// This file implements the profile analysis. Per-op formulas (elements are
// evaluated at the point's batch/seq/past):
//   matmul      MACs = elements(out) * K; FLOPs = 2 MACs
//   attention   MACs = B * H * (Dk + Dv) * keys, keys = sum over queries of
//               the positions a causal (sliding-window) kernel visits
//   elementwise/norm/softmax/rope: a fixed FLOP count per element (table in
//               docs/profile.md), transcendentals counted apart as well
//   bytes       operands read + results written; weights at weight bits,
//               activations at activation bits, caches at KV bits; layout
//               ops (reshape, transpose, split, concat, slice) move nothing
//   experts     body compute x k per token; body weights x the expected
//               number of distinct experts the batch touches
//
//===----------------------------------------------------------------------===//
#include "analysis/Profile.h"

#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

namespace archc {

using ir::OpKind;

using ir::expectedDistinctExperts;

int64_t ModelFacts::activatedParamsPerToken() const {
  int64_t p = params;
  for (const MoeFacts &m : moe)
    p -= (m.experts - m.topK) * m.paramsPerExpert * m.layers;
  return p;
}

double ModelFacts::expectedActivatedParams(double tokens) const {
  double p = static_cast<double>(params - expertParams);
  for (const MoeFacts &m : moe)
    p += expectedDistinctExperts(m.experts, m.topK, tokens) *
         static_cast<double>(m.paramsPerExpert * m.layers);
  return p;
}

int64_t ModelFacts::worstCaseActivatedParams(int64_t tokens) const {
  int64_t p = params - expertParams;
  for (const MoeFacts &m : moe) {
    int64_t touched = tokens > m.experts / std::max<int64_t>(m.topK, 1)
                          ? m.experts
                          : std::min(tokens * m.topK, m.experts);
    p += touched * m.paramsPerExpert * m.layers;
  }
  return p;
}

double ModelFacts::kvBytesPerToken(double kvBits) const {
  double n = 0;
  for (const StateFacts &s : states)
    if (!s.perEncoderPosition)
      n += static_cast<double>(s.elementsPerToken) /
           static_cast<double>(std::max<int64_t>(s.stride, 1)) *
           static_cast<double>(s.layers.size()) *
           (s.bits > 0 ? s.bits : kvBits);
  return n / 8;
}

double ModelFacts::stateBytesPerSequence(double kvBits) const {
  double n = 0;
  for (const StateFacts &s : states)
    n += static_cast<double>(s.elementsPerSequence) *
         static_cast<double>(s.layers.size()) * (s.bits > 0 ? s.bits : kvBits);
  return n / 8;
}

double ModelFacts::crossBytesPerEncoderPosition(double kvBits) const {
  double n = 0;
  for (const StateFacts &s : states)
    if (s.perEncoderPosition)
      n += static_cast<double>(s.elementsPerToken) *
           static_cast<double>(s.layers.size()) *
           (s.bits > 0 ? s.bits : kvBits);
  return n / 8;
}

double ModelFacts::kvBytes(int64_t context, int64_t batch, double kvBits,
                           int64_t encoderPositions) const {
  double n = 0;
  for (const StateFacts &s : states) {
    if (s.perEncoderPosition)
      continue;
    int64_t tokens = s.window > 0 ? std::min(context, s.window) : context;
    tokens /= std::max<int64_t>(s.stride, 1); // complete windows only
    n += static_cast<double>(s.elementsPerToken) *
         static_cast<double>(s.layers.size()) * static_cast<double>(tokens) *
         (s.bits > 0 ? s.bits : kvBits);
  }
  n += stateBytesPerSequence(kvBits) * 8;
  n += crossBytesPerEncoderPosition(kvBits) * 8 *
       static_cast<double>(encoderPositions);
  return n * static_cast<double>(batch) / 8;
}

double kvBytesAt(const ModelFacts &f, const ProfilePoint &p, double kvBits) {
  auto it = p.dims.find("enc_seq");
  return f.kvBytes(p.past + p.seq, p.batch, kvBits,
                   it == p.dims.end() ? 0 : it->second);
}

namespace {

/// Fraction of key positions holding data: an op's density rule, dense
/// results, or the sparsest operand's.
double densityOf(const ir::Value *v,
                 std::map<const ir::Value *, double> &memo) {
  auto it = memo.find(v);
  if (it != memo.end())
    return it->second;
  double d = 1;
  if (const ir::Op *op = v->getDefiningOp()) {
    const ir::OpSchema &s = ir::opSchema(op->getKind());
    if (s.density) {
      std::vector<double> operands;
      for (const ir::Value *o : op->operands)
        operands.push_back(densityOf(o, memo));
      d = s.density(*op, v->getResultIndex(), operands);
    } else if (!s.denseResults) {
      for (const ir::Value *o : op->operands)
        d = std::min(d, densityOf(o, memo));
    }
  }
  memo[v] = d;
  return d;
}

int64_t staticElements(const ir::TensorType &t) {
  return t.numElements().getConstant().value_or(0);
}

/// The attention op that reads a cache op's keys/values (not its extra
/// keys), if any.
const ir::Op *attentionReading(const ir::Block &b, const ir::Value *v) {
  for (const auto &op : b.getOps()) {
    if (op->getKind() == OpKind::Attention &&
        (op->getOperand(1) == v || op->getOperand(2) == v))
      return op.get();
    if (op->getKind() == OpKind::MlaAttention)
      for (const ir::Value *o : op->operands)
        if (o == v)
          return op.get();
  }
  return nullptr;
}

int64_t paramsOf(const ir::Module &m, const std::string &pattern) {
  for (const ir::WeightDecl &w : m.weights)
    if (w.pattern == pattern)
      return staticElements(w.type);
  return 0;
}

} // namespace

double keyDensity(const ir::Value *v) {
  std::map<const ir::Value *, double> memo;
  return densityOf(v, memo);
}

ModelFacts computeModelFacts(const ir::Module &m) {
  // The sums fit in int64: the evaluator bounds a module's parameters to
  // 2^50 and its tensors to 2^20 (Evaluator::kMaxParams, kMaxTensors).
  ModelFacts f;
  for (const ir::WeightDecl &w : m.weights) {
    int64_t n = staticElements(w.type) * w.count();
    f.weightTensors += w.count();
    if (w.buffer) { // a checkpoint tensor, not a parameter
      f.bufferElements += n;
      continue;
    }
    f.params += n;
    if (w.experts || w.stackedExperts)
      f.expertParams += n;
  }
  for (const auto &op : m.graph.body.getOps()) {
    if (op->getKind() != OpKind::Repeat)
      continue;
    f.layers += op->attr<int64_t>("end") - op->attr<int64_t>("begin");
    if (op->getNumOperands())
      f.hidden = op->getOperand(0)->type.dims.back().getConstant().value_or(0);
    for (const auto &region : op->getRegions()) {
      for (const auto &inner : region->getOps()) {
        if (inner->getKind() == OpKind::Cache) {
          StateFacts s;
          s.name = inner->attr<std::string>("name");
          s.layers = region->layers;
          const ir::TensorType &x = inner->getOperand(0)->type;
          s.elementsPerToken = 1;
          for (size_t i = 2; i < x.rank(); ++i)
            s.elementsPerToken *= x.dims[i].getConstant().value_or(0);
          if (const ir::Op *attn =
                  attentionReading(*region, inner->getResult(0)))
            if (attn->getKind() == OpKind::Attention) { // MLA has no window
              if (const int64_t *w = attn->optAttr<int64_t>("window"))
                s.window = *w;
              // A chunked layer needs at most its chunk's keys.
              if (const int64_t *c = attn->optAttr<int64_t>("chunk"))
                s.window = *c;
            }
          s.stride = static_cast<int64_t>(
              std::llround(1.0 / keyDensity(inner->getOperand(0))));
          const bool *once = inner->optAttr<bool>("once");
          s.perEncoderPosition = once && *once;
          f.states.push_back(s);
        }
        if (ir::opSchema(inner->getKind()).stateType) {
          ir::TensorType t;
          if (ir::recurrentStateType(*inner, t)) {
            StateFacts s;
            s.name = inner->attr<std::string>("state");
            s.layers = region->layers;
            s.elementsPerSequence = 1;
            for (size_t i = 1; i < t.rank(); ++i)
              s.elementsPerSequence *= t.dims[i].getConstant().value_or(0);
            if (ir::opSchema(inner->getKind()).stateInFloat32)
              s.bits = 32;
            f.states.push_back(s);
          }
        }
        if (inner->getKind() == OpKind::Experts) {
          MoeFacts mf;
          mf.experts = inner->attr<int64_t>("count");
          mf.topK =
              inner->getOperand(1)->type.dims.back().getConstant().value_or(0);
          mf.layers = static_cast<int64_t>(region->layers.size());
          ir::walk(*inner->getRegions()[0], [&](const ir::Op &b) {
            if (b.getKind() == OpKind::Param &&
                b.attr<std::string>("name").find("{e}") != std::string::npos)
              mf.paramsPerExpert += paramsOf(m, b.attr<std::string>("name"));
            if (b.getKind() == OpKind::ExpertSlice)
              mf.paramsPerExpert += staticElements(b.getResult()->type);
          });
          f.moe.push_back(mf);
        }
      }
    }
  }
  return f;
}

std::optional<std::string> checkProfilePoint(int64_t batch, int64_t seq,
                                             int64_t past,
                                             int64_t extraPerSequence) {
  int64_t perSequence = 0, tokens = 0, context = 0;
  if (__builtin_add_overflow(seq, extraPerSequence, &perSequence) ||
      __builtin_mul_overflow(batch, perSequence, &tokens) ||
      tokens > kMaxProfileTokens)
    return fmt::format(
        "batch {} x seq {}{} is more than the profile's "
        "limit of 2^48 tokens",
        batch, seq,
        extraPerSequence ? fmt::format(" (+ {} image tokens)", extraPerSequence)
                         : "");
  if (__builtin_add_overflow(past, perSequence, &context) ||
      context > kMaxProfileTokens)
    return fmt::format("a context of {} + {} tokens is more than the "
                       "profile's limit of 2^48 tokens",
                       past, perSequence);
  return std::nullopt;
}

namespace {

/// The profile point as the ops' cost rules see it: dims bound to the
/// point's batch, seq and past, operands at the runtime's precisions.
class OpCoster : public ir::CostContext {
public:
  OpCoster(const ProfilePoint &p, const Precision &bits)
      : bits(bits), env{{"batch", p.batch}, {"seq", p.seq}, {"past", p.past}} {
    for (const auto &[name, value] : p.dims)
      env[name] = value;
  }

  /// In double: costs are doubles, and a dim whose value does not fit in
  /// int64 at a large point (batch x seq x width) is then approximate, never
  /// wrapped.
  double dim(const ir::SymExpr &d) const override {
    double total = 0;
    for (const auto &[monomial, coefficient] : d.getTerms()) {
      double term = static_cast<double>(coefficient);
      for (const auto &[symbol, power] : monomial) {
        auto it = env.find(symbol);
        if (it == env.end())
          return 0;
        for (unsigned k = 0; k < power; ++k)
          term *= static_cast<double>(it->second);
      }
      total += term;
    }
    return total;
  }

  bool isWeight(const ir::Value *v) const override {
    const ir::Op *d = v->getDefiningOp();
    if (d && d->getKind() == OpKind::ExpertSlice) {
      d = d->getOperand(0)->getDefiningOp();
      if (d && d->getKind() == OpKind::Reshape) // a reshaped stacked weight
        d = d->getOperand(0)->getDefiningOp();
    }
    return d && d->getKind() == OpKind::Param;
  }

  void read(const ir::Value *v, Cost &c) const override {
    double n = elements(v->type);
    if (isWeight(v))
      c.weightBytes += n * weightBitsOf(v) / 8;
    else if (!ir::isFloat(v->type.dtype))
      c.activationBytes += n * ir::dtypeBits(v->type.dtype) / 8;
    else
      c.activationBytes += n * bits.activationBits / 8;
  }
  void write(const ir::Value *v, Cost &c) const override {
    double n = elements(v->type);
    c.activationBytes +=
        n *
        (ir::isFloat(v->type.dtype) ? bits.activationBits
                                    : ir::dtypeBits(v->type.dtype)) /
        8;
  }

  double weightBits() const override { return bits.weightBits; }
  /// A weight as stored: the quantized form when the op being costed is
  /// one of its quantized readers, its float form otherwise.
  double weightBitsOf(const ir::Value *v) const override {
    if (!bits.storage)
      return bits.weightBits;
    const ir::Op *d = v->getDefiningOp();
    if (d && d->getKind() == OpKind::ExpertSlice)
      d = d->getOperand(0)->getDefiningOp();
    if (!d || d->getKind() != OpKind::Param)
      return bits.weightBits;
    auto it = bits.storage->byPattern.find(
        ir::weightKey(d->attr<std::string>("name"), d->getResult()->type));
    if (it == bits.storage->byPattern.end())
      return bits.weightBits;
    const ir::WeightStorage::Forms &f = it->second;
    bool quantized = current && bits.storage->quantizedReaders.count(current);
    if (quantized && f.quantBits > 0)
      return f.quantBits;
    return f.floatBits > 0 ? f.floatBits : f.quantBits;
  }
  double activationBits() const override { return bits.activationBits; }
  double kvBits() const override { return bits.kvBits; }

  double density(const ir::Value *v) const override {
    return densityOf(v, densityMemo);
  }

  Cost regionCost(const ir::Block &b) const override {
    Cost c;
    for (const auto &inner : b.getOps())
      c += cost(*inner);
    return c;
  }

  /// The op's cost rule; ops over compressed entries (whose rule does not
  /// account for them) work on the positions that hold one.
  Cost cost(const ir::Op &op) const {
    const ir::OpSchema &s = ir::opSchema(op.getKind());
    if (!s.cost)
      return {};
    const ir::Op *outer = current;
    current = &op;
    Cost c = s.cost(op, *this);
    current = outer;
    if (!s.costHandlesDensity && op.getNumResults() > 0) {
      double dn = density(op.getResult(0));
      if (dn < 1)
        c = c.scaled(dn);
    }
    return c;
  }

private:
  const Precision &bits;
  mutable const ir::Op *current = nullptr; ///< the op being costed
  std::map<std::string, int64_t> env;
  mutable std::map<const ir::Value *, double> densityMemo;
};

} // namespace

namespace {
/// The ops of `b` that run only to fill a cache computed once (the cache
/// op and the ops whose every result is used by such ops alone): the
/// cross-attention projections a cached encoder-decoder step skips.
std::set<const ir::Op *> onceCacheOnlyOps(const ir::Block &b) {
  std::map<const ir::Value *, std::vector<const ir::Op *>> users;
  for (const auto &op : b.getOps())
    for (const ir::Value *v : op->operands)
      users[v].push_back(op.get());
  std::set<const ir::Op *> only;
  const auto &ops = b.getOps();
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    const ir::Op &op = **it;
    if (op.getKind() == OpKind::Cache) {
      const bool *once = op.optAttr<bool>("once");
      if (once && *once)
        only.insert(&op);
      continue;
    }
    bool feedsOnly = op.getNumResults() > 0;
    for (size_t r = 0; feedsOnly && r < op.getNumResults(); ++r) {
      auto u = users.find(op.getResult(r));
      if (u == users.end())
        feedsOnly = false;
      else
        for (const ir::Op *user : u->second)
          feedsOnly &= only.count(user) != 0;
    }
    if (feedsOnly)
      only.insert(&op);
  }
  return only;
}
} // namespace

std::vector<OpProfile> profileOps(const ir::Module &m, const ProfilePoint &p,
                                  const Precision &bits) {
  OpCoster coster(p, bits);
  std::vector<OpProfile> out;
  bool seenRepeat = false;
  for (const auto &op : m.graph.body.getOps()) {
    if (op->getKind() == OpKind::Repeat) {
      seenRepeat = true;
      for (const auto &region : op->getRegions()) {
        double n = static_cast<double>(region->layers.size());
        std::string group = "layers " + ir::formatLayers(region->layers);
        std::set<const ir::Op *> skipped;
        if (p.crossCached)
          skipped = onceCacheOnlyOps(*region);
        for (const auto &inner : region->getOps()) {
          if (skipped.count(inner.get()))
            continue;
          Cost c = coster.cost(*inner);
          out.push_back({inner.get(), group, n, c.scaled(n)});
        }
      }
      continue;
    }
    Cost c = coster.cost(*op);
    out.push_back({op.get(), seenRepeat ? "head" : "embedding", 1, c});
  }
  return out;
}

} // namespace archc
