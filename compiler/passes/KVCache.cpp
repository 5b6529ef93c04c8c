//===- KVCache.cpp - Decode-time state insertion --------------------------===//
//
// This file implements the kv-cache pass. It is generic over stateful ops:
// every `cache` op (state that grows along the sequence; K and V of
// attention, MLA latents, ...) inside a layer kind gets
//   %p = state_in "past_key_values.{i}.<name>"   [storage layout, seq = past]
//   %full, %present = cache %x, %p               [full keys: past + seq]
//   state_out "present.{i}.<name>" %present
// and the graph gains the per-layer state inputs/outputs. Rank-4 states
// ([batch, seq, heads, d]) are stored [batch, heads, seq, d], the layout of
// onnxruntime-genai and Optimum. Ops of constant-size state (those whose
// schema declares a stateType: causal_conv1d, delta_rule, compress,
// selective_scan, ssd_scan) get the same I/O with their own state type
// (`past_key_values.{i}.conv_state`, `.recurrent_state`, `.ssm_state`, ...)
// and a second result, the present state. A cache computed once (`once`: an
// encoder-decoder's cross-attention keys and values) gets a past state whose
// length is its own symbol (`enc_past`: the entries a first call computed,
// empty before it) and reads the graph input `use_cache_branch` (bool [1]),
// which says whether the past state holds them; split between two graphs
// (`carry`), it is a present state alone in the graph that computes it and
// a past state alone in the graph fed it. Then `attention_mask`
// [batch, past + seq] is added and read by every attention op that takes
// the padding mask and every recurrent op (none when no op reads it). Run
// after
// shape-inference (the state types come from the cached values) and run
// shape-inference again afterwards.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"
#include "passes/MaskUtils.h"
#include "passes/Passes.h"

#include <fmt/format.h>

#include <set>

namespace archc {

using namespace ir;

namespace {
class KVCachePass : public Pass {
public:
  std::string_view getArgument() const override { return "kv-cache"; }
  std::string_view getSummary() const override {
    return "add past/present state I/O and the attention mask";
  }

  bool run(Module &m, PassContext &ctx) override {
    SymExpr past = SymExpr::symbol("past");
    SymExpr seq = SymExpr::symbol("seq");
    SymExpr crossPast = SymExpr::symbol("enc_past");
    Value *useCache = nullptr;
    for (auto &opPtr : m.graph.body.getOps()) {
      if (opPtr->getKind() != OpKind::Repeat)
        continue;
      for (auto &region : opPtr->getRegions()) {
        std::set<std::string> names;
        auto &ops = region->getOps();
        for (auto it = ops.begin(); it != ops.end(); ++it) {
          Op &op = **it;
          bool recurrent = opSchema(op.getKind()).stateType != nullptr;
          if (op.getKind() != OpKind::Cache && !recurrent)
            continue;
          if (op.hasOperand("past")) {
            reportOpError(ctx.diags, op,
                          "already has a past state (kv-cache "
                          "ran twice?)");
            return false;
          }
          std::string name = op.attr<std::string>(recurrent ? "state" : "name");
          if (!names.insert(name).second) {
            reportOpError(
                ctx.diags, op,
                fmt::format("two states named '{}' in one layer", name));
            return false;
          }
          TensorType pastType, presentType;
          if (recurrent) {
            if (!recurrentStateType(op, pastType)) {
              reportOpError(ctx.diags, op,
                            "state type unknown: run shape-inference before "
                            "kv-cache");
              return false;
            }
            presentType = pastType;
          } else {
            const TensorType &x = op.getOperand(0)->type;
            if (!x.known) {
              reportOpError(ctx.diags, op,
                            "state type unknown: run shape-inference before "
                            "kv-cache");
              return false;
            }
            const bool *onceAttr = op.optAttr<bool>("once");
            bool once = onceAttr && *onceAttr;
            const std::string *carry = op.optAttr<std::string>("carry");
            std::vector<int64_t> layout = cacheLayout(x.rank());
            pastType = TensorType(x.dtype, {});
            for (int64_t axis : layout)
              pastType.dims.push_back(axis == 1 ? (once ? crossPast : past)
                                                : x.dims[axis]);
            presentType = pastType;
            for (size_t i = 0; i < layout.size(); ++i)
              if (layout[i] == 1)
                presentType.dims[i] = once ? x.dims[1] : past + seq;
            op.setAttr("layout", layout);
            if (carry && *carry == "output") {
              // The entries, exported: a present state and no past.
              std::string outName = "present.{i}." + name;
              Value *present = op.addResult(presentType);
              auto out = std::make_unique<Op>(OpKind::StateOut, op.getLoc());
              out->setAttr("name", outName);
              out->operands.push_back(present);
              region->insert(std::next(it), std::move(out));
              m.graph.stateOutputs.push_back(
                  {outName, presentType, region->layers});
              continue;
            }
            if (once && !carry) {
              if (!useCache)
                useCache = m.graph.body.addArgument(
                    TensorType(DType::Bool, {SymExpr(1)}), "use_cache_branch");
              op.setOperand("use_cache", useCache);
            }
          }

          std::string inName = "past_key_values.{i}." + name;
          std::string outName = "present.{i}." + name;
          auto in = std::make_unique<Op>(OpKind::StateIn, op.getLoc());
          in->setAttr("name", inName);
          Value *pastValue = in->addResult(pastType);
          region->insert(it, std::move(in));
          op.setOperand("past", pastValue);
          m.graph.stateInputs.push_back({inName, pastType, region->layers});
          const std::string *carry =
              recurrent ? nullptr : op.optAttr<std::string>("carry");
          if (carry && *carry == "input")
            continue; // read, never updated: no present state
          Value *present = op.addResult(presentType);
          auto out = std::make_unique<Op>(OpKind::StateOut, op.getLoc());
          out->setAttr("name", outName);
          out->operands.push_back(present);
          auto next = std::next(it);
          region->insert(next, std::move(out));
          m.graph.stateOutputs.push_back(
              {outName, presentType, region->layers});
        }
      }
    }
    return addAttentionMask(m, past + seq, ctx.diags);
  }
};
} // namespace

std::unique_ptr<Pass> createKVCachePass() {
  return std::make_unique<KVCachePass>();
}

} // namespace archc
