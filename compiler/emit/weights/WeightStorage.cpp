//===- WeightStorage.cpp - How each weight of a model is stored
//------------===//
//
// This file implements WeightStorage (WeightStorage.h).
//
//===----------------------------------------------------------------------===//
#include "emit/weights/WeightStorage.h"

#include <fmt/format.h>

namespace archc {

WeightStorage::WeightStorage(const ir::Module &m, const ir::QuantOptions &quant,
                             const ir::CheckpointQuant &checkpoint)
    : module(m), quantOptions(quant), checkpointQuant(checkpoint) {
  if (!quant.enabled())
    return;
  // How often each value is read, to keep slices other ops also read.
  std::map<const ir::Value *, int> reads;
  ir::walk(m.graph.body, [&](const ir::Op &op) {
    for (const ir::Value *v : op.operands)
      ++reads[v];
  });
  for (const ir::LinearWeightUse &u : ir::findLinearWeightUses(m)) {
    if (u.slice && reads[u.slice->getResult()] != 1)
      continue;
    matmuls[u.matmul] = u;
    params.insert(u.param);
    if (u.slice)
      slices.insert(u.slice);
  }
  if (quant.embeddings)
    for (const ir::Op *g : ir::findEmbeddingGathers(m)) {
      gathers.insert(g);
      params.insert(g->getOperand(0)->getDefiningOp());
    }
}

ir::QuantLayout WeightStorage::layout(int64_t rows, int64_t cols,
                                      int64_t experts,
                                      ir::DType activations) const {
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

void WeightStorage::reportFloatProjections(DiagnosticEngine &diags) const {
  if (!quantOptions.enabled())
    return;
  std::set<const ir::Op *> quantized;
  for (const auto &[op, use] : matmuls)
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
