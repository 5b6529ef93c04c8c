//===- AttentionMask.cpp - Padding mask for the single-pass form ----------===//
//
// This file implements the attention-mask pass: it adds the graph input
// `attention_mask` [batch, seq] (int64, 1 = real token, 0 = padding) and
// makes every attention op read it. The kv-cache pass does the same with
// [batch, past + seq].
//
//===----------------------------------------------------------------------===//
#include "passes/MaskUtils.h"
#include "passes/Passes.h"

namespace archc {

namespace {
class AttentionMaskPass : public Pass {
public:
  std::string_view getArgument() const override { return "attention-mask"; }
  std::string_view getSummary() const override {
    return "add the padding attention mask (no cache)";
  }
  bool run(ir::Module &m, PassContext &ctx) override {
    return addAttentionMask(m, ir::SymExpr::symbol("seq"), ctx.diags);
  }
};
} // namespace

std::unique_ptr<Pass> createAttentionMaskPass() {
  return std::make_unique<AttentionMaskPass>();
}

} // namespace archc
