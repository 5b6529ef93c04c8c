//===- MaskUtils.cpp - Shared attention-mask wiring -----------------------===//
//
// This file implements addAttentionMask().
//
//===----------------------------------------------------------------------===//
#include "passes/MaskUtils.h"

#include "ir/OpSchema.h"

namespace archc {

bool addAttentionMask(ir::Module &m, const ir::SymExpr &length,
                      DiagnosticEngine &diags) {
  ir::Block &body = m.graph.body;
  for (const auto &arg : body.getArguments())
    if (arg->name == "attention_mask") {
      diags.error(SourceRange(),
                  "the graph already has an 'attention_mask' input (run "
                  "either kv-cache or attention-mask, once)");
      return false;
    }
  ir::Value *mask = body.addArgument(
      ir::TensorType(ir::DType::I64, {ir::SymExpr::symbol("batch"), length}),
      "attention_mask");
  ir::walk(body, [&](ir::Op &op) {
    bool reads = op.getKind() == ir::OpKind::Attention ||
                 op.getKind() == ir::OpKind::MlaAttention ||
                 ir::opSchema(op.getKind()).stateType != nullptr;
    if (reads && !op.hasOperand("mask"))
      op.setOperand("mask", mask);
  });
  return true;
}

} // namespace archc
