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
  // The ops that read the padding mask: attention (unless it takes its
  // masks itself, padding_mask: false) and every op with decode state.
  auto reads = [](const ir::Op &op) {
    if (op.getKind() == ir::OpKind::Attention) {
      const bool *padding = op.optAttr<bool>("padding_mask");
      return !padding || *padding;
    }
    return op.getKind() == ir::OpKind::MlaAttention ||
           ir::opSchema(op.getKind()).stateType != nullptr;
  };
  bool needed = false;
  ir::walk(static_cast<const ir::Block &>(body),
           [&](const ir::Op &op) { needed |= reads(op); });
  if (!needed)
    return true;
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
    if (reads(op) && !op.hasOperand("mask"))
      op.setOperand("mask", mask);
  });
  return true;
}

} // namespace archc
