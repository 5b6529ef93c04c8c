//===- DeadCode.cpp - Removal of unused ops -------------------------------===//
//
// This file implements the dead-code pass: ops whose results nothing uses
// are removed (to a fixed point, inside layer kinds too), except the graph's
// outputs, region terminators, state I/O and exported caches (`carry:
// "output"`). Weight declarations stay: a
// checkpoint tensor the graph does not read (LLaVA's CLIP post_layernorm and
// layers past the selected feature layer, SigLIP's unused pooling head) is
// still listed by -emit=weights and counted as a parameter, but it is
// neither computed nor bound. The default pipelines run it on the named
// graphs of a package (vision encoders select part of their tower).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include <unordered_map>

namespace archc {

using namespace ir;

namespace {
/// Whether the op itself acts beyond its results.
bool ownEffects(const Op &op) {
  switch (op.getKind()) {
  case OpKind::Return:
  case OpKind::Yield:
  case OpKind::StateOut:
  case OpKind::StateIn:
    return true;
  case OpKind::Cache: {
    // Entries the graph exports (carry "output") are read by no op yet.
    const std::string *carry = op.optAttr<std::string>("carry");
    return carry && *carry == "output";
  }
  default:
    return false;
  }
}

bool hasEffects(const Op &op) {
  if (ownEffects(op))
    return true;
  bool effects = false;
  for (const auto &r : op.getRegions())
    walk(static_cast<const Block &>(*r), [&](const Op &inner) {
      effects |= inner.getKind() != OpKind::Yield && ownEffects(inner);
    });
  return effects;
}

void countUses(const Block &b, std::unordered_map<const Value *, size_t> &n) {
  walk(b, [&](const Op &op) {
    for (const Value *v : op.operands)
      ++n[v];
  });
}

/// Removes dead ops of `b` and of its nested regions; true when any went.
bool sweep(Block &b, const std::unordered_map<const Value *, size_t> &uses) {
  bool changed = false;
  auto &ops = b.getOps();
  for (auto it = ops.begin(); it != ops.end();) {
    Op &op = **it;
    for (auto &r : op.getRegions())
      changed |= sweep(*r, uses);
    bool used = hasEffects(op);
    for (const auto &res : op.getResults())
      if (auto u = uses.find(res.get()); u != uses.end() && u->second)
        used = true;
    if (!used) {
      it = ops.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  return changed;
}

class DeadCodePass : public Pass {
public:
  std::string_view getArgument() const override { return "dead-code"; }
  std::string_view getSummary() const override {
    return "remove ops whose results are unused (weights stay declared)";
  }

  bool run(Module &m, PassContext &) override {
    for (bool changed = true; changed;) {
      std::unordered_map<const Value *, size_t> uses;
      countUses(m.graph.body, uses);
      changed = sweep(m.graph.body, uses);
    }
    return true;
  }
};
} // namespace

std::unique_ptr<Pass> createDeadCodePass() {
  return std::make_unique<DeadCodePass>();
}

} // namespace archc
