//===- WeightStorage.cpp - How each weight of a model is stored -----------===//
//
// This file implements WeightStorage (WeightStorage.h).
//
//===----------------------------------------------------------------------===//
#include "emit/weights/WeightStorage.h"

#include <fmt/format.h>

namespace archc {

namespace {
/// The instances a matmul's weight stands for: its name, or one name per
/// expert for a per-expert pattern (`...experts.{e}...`) of a body of
/// `experts` experts.
std::vector<std::string> instances(const ir::LinearWeightUse &u,
                                   int64_t experts) {
  const std::string &name = u.param->attr<std::string>("name");
  if (name.find("{e}") == std::string::npos)
    return {name};
  std::vector<std::string> out;
  for (int64_t e = 0; e < experts; ++e)
    out.push_back(ir::instantiatePattern(name, -1, e));
  return out;
}
} // namespace

WeightStorage::WeightStorage(const ir::Module &m, const ir::QuantOptions &quant,
                             const ir::CheckpointQuant &checkpoint,
                             const Checkpoint *ckpt)
    : module(m), quantOptions(quant), checkpointQuant(checkpoint) {
  if (ckpt && checkpoint.perModule())
    packedCatalog = std::make_unique<PackedWeights>(*ckpt, checkpoint);
  if (!quant.enabled() && !packedCatalog)
    return;
  // How often each value is read, to keep slices other ops also read; the
  // expert count of the bodies holding per-expert weights.
  std::map<const ir::Value *, int> reads;
  std::map<const ir::Op *, int64_t> bodyExperts;
  ir::walk(m.graph.body, [&](const ir::Op &op) {
    for (const ir::Value *v : op.operands)
      ++reads[v];
    if (op.getKind() == ir::OpKind::Experts)
      for (const auto &inner : op.getRegions()[0]->getOps())
        bodyExperts[inner.get()] = op.attr<int64_t>("count");
  });
  for (const ir::LinearWeightUse &u : ir::findLinearWeightUses(m)) {
    if (u.slice && reads[u.slice->getResult()] != 1)
      continue;
    // The checkpoint's codes: every instance stored packed, read as the
    // [out, in] matrix they are.
    bool codes = false;
    if (packedCatalog && !u.slice && !u.inOut) {
      auto it = bodyExperts.find(u.matmul);
      std::vector<std::string> names =
          instances(u, it == bodyExperts.end() ? 1 : it->second);
      codes = true;
      for (const std::string &n : names)
        codes &= packedCatalog->stores(n);
      if (codes)
        for (const std::string &n : names)
          if (const PackedWeight *p = packedCatalog->find(n, {u.rows, u.cols}))
            codeBits.insert(p->containerBits);
    }
    if (!codes && !quant.enabled())
      continue;
    if (codes)
      checkpointCodes.insert(u.matmul);
    matmuls[u.matmul] = u;
    params.insert(u.param);
    if (u.slice)
      slices.insert(u.slice);
  }
  // A Reshape of a stack that only quantized slices read has no float form
  // either (DBRX's experts).
  std::map<const ir::Op *, bool> reshapes;
  for (const auto &[op, u] : matmuls)
    if (u.reshape)
      reshapes[u.reshape] = true;
  ir::walk(m.graph.body, [&](const ir::Op &op) {
    for (const ir::Value *v : op.operands)
      if (const ir::Op *d = v->getDefiningOp(); d && reshapes.count(d))
        reshapes[d] = reshapes[d] && slices.count(&op) > 0;
  });
  for (const auto &[r, onlySlices] : reshapes)
    if (onlySlices)
      slices.insert(r);
  if (quant.enabled()) {
    for (const ir::MlaWeightUse &u : ir::findMlaWeightUses(m)) {
      mla[u.op] = u;
      params.insert(u.param);
    }
    // Grouped projections; their Reshape has no float form when only the
    // matmul reads it.
    for (const ir::GroupedWeightUse &u : ir::findGroupedWeightUses(m)) {
      grouped[u.matmul] = u;
      params.insert(u.param);
      if (reads[u.reshape->getResult()] == 1)
        slices.insert(u.reshape);
    }
  }
  if (quant.embeddings)
    for (const ir::Op *g : ir::findEmbeddingGathers(m)) {
      gathers.insert(g);
      params.insert(g->getOperand(0)->getDefiningOp());
    }
}

WeightStorage::Kind WeightStorage::kindOf(const ir::Op *matmul) const {
  if (checkpointCodes.count(matmul))
    return Kind::CheckpointCodes;
  return matmuls.count(matmul) ? Kind::Requantized : Kind::Float;
}

const PackedWeight *WeightStorage::packedWeight(const std::string &name) const {
  return packedCatalog ? packedCatalog->get(name) : nullptr;
}

ir::QuantLayout WeightStorage::layout(int64_t rows, int64_t cols,
                                      int64_t experts, ir::DType activations,
                                      const std::string &name) const {
  if (const PackedWeight *p = name.empty() ? nullptr : packedWeight(name)) {
    // Its bits, block and zero points; the shape the reader asks for (a
    // stack may interleave several such matrices).
    ir::QuantLayout l = p->layout(ir::dtypeBits(activations));
    l.rows = rows;
    l.cols = cols;
    l.experts = experts;
    return l;
  }
  ir::QuantLayout l;
  l.bits = quantOptions.bits;
  l.block = quantOptions.block;
  l.rows = rows;
  l.cols = cols;
  l.experts = experts;
  l.symmetric = quantOptions.symmetric;
  l.scaleBits = ir::dtypeBits(activations);
  return l;
}

std::string WeightStorage::fileTag(ir::DType activations) const {
  if (quantOptions.enabled())
    return ir::quantFileTag(quantOptions, activations);
  if (codeBits.empty())
    return "";
  ir::QuantOptions q;
  q.bits = codeBits.count(4) ? 4 : 8;
  return ir::quantFileTag(q, activations);
}

void WeightStorage::reportFloatProjections(DiagnosticEngine &diags) const {
  if (!quantOptions.enabled())
    return;
  std::set<const ir::Op *> quantized;
  for (const auto &[op, use] : matmuls)
    quantized.insert(op);
  for (const auto &[op, use] : mla)
    quantized.insert(op);
  for (const auto &[op, use] : grouped)
    quantized.insert(op);
  // One line per weight (layers and experts share a pattern).
  std::map<std::string, std::string> byWeight;
  for (const ir::FloatProjection &f :
       ir::findFloatProjections(module, quantized))
    byWeight.emplace(f.weight, f.reason);
  if (byWeight.empty())
    return;
  std::string list;
  for (const auto &[weight, reason] : byWeight)
    list += fmt::format("\n  {} ({})", weight, reason);
  diags.report(Severity::Note, SourceRange(),
               fmt::format("--quant leaves {} projection weight{} in float:{}",
                           byWeight.size(), byWeight.size() == 1 ? "" : "s",
                           list));
}

} // namespace archc
