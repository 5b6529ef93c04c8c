//===- ExpandRepeat.cpp - Unroll layer loops ------------------------------===//
//
// This file implements the expand-repeat pass: each `repeat` op is replaced
// by one copy of its layer kind's body per layer, in layer order, with `{i}`
// substituted in weight and state names. Expert bodies keep `{e}` (they are
// expanded by the back end that lowers them).
//
//===----------------------------------------------------------------------===//
#include "ir/Clone.h"
#include "passes/Passes.h"

namespace archc {

using namespace ir;

namespace {
class ExpandRepeatPass : public Pass {
public:
  std::string_view getArgument() const override { return "expand-repeat"; }
  std::string_view getSummary() const override {
    return "unroll layer loops with concrete weight names";
  }

  bool run(Module &m, PassContext &) override {
    Block &body = m.graph.body;
    auto &ops = body.getOps();
    for (auto it = ops.begin(); it != ops.end();) {
      Op &rep = **it;
      if (rep.getKind() != OpKind::Repeat) {
        ++it;
        continue;
      }
      std::map<int64_t, Block *> kindOf;
      for (auto &region : rep.getRegions())
        for (int64_t l : region->layers)
          kindOf[l] = region.get();
      std::vector<Value *> carried = rep.operands;
      int64_t begin = rep.attr<int64_t>("begin"),
              end = rep.attr<int64_t>("end");
      for (int64_t l = begin; l < end; ++l) {
        Block *kind = kindOf[l];
        ValueMap map;
        for (size_t k = 0; k < carried.size(); ++k)
          map[kind->getArgument(k)] = carried[k];
        for (auto &opPtr : kind->getOps()) {
          if (opPtr->getKind() == OpKind::Yield) {
            for (size_t k = 0; k < carried.size(); ++k)
              carried[k] = map.at(opPtr->getOperand(k));
            continue;
          }
          std::unique_ptr<Op> copy = cloneOp(*opPtr, map);
          if (copy->getKind() == OpKind::Param ||
              copy->getKind() == OpKind::StateIn ||
              copy->getKind() == OpKind::StateOut)
            copy->setAttr("name", instantiatePattern(
                                      copy->attr<std::string>("name"), l, -1));
          substituteLayer(*copy, l);
          body.insert(it, std::move(copy));
        }
      }
      replaceAllUses(body, rep, carried);
      it = ops.erase(it);
    }
    return true;
  }

private:
  /// Params inside expert bodies keep {e} but get their layer.
  static void substituteLayer(Op &op, int64_t layer) {
    for (auto &region : op.getRegions())
      for (auto &inner : region->getOps()) {
        if (inner->getKind() == OpKind::Param)
          inner->setAttr(
              "name",
              instantiatePattern(inner->attr<std::string>("name"), layer, -1));
        substituteLayer(*inner, layer);
      }
  }

  static void replaceAllUses(Block &b, const Op &rep,
                             const std::vector<Value *> &with) {
    walk(b, [&](Op &op) {
      for (Value *&v : op.operands)
        if (v->getDefiningOp() == &rep)
          v = with[v->getResultIndex()];
    });
  }
};
} // namespace

std::unique_ptr<Pass> createExpandRepeatPass() {
  return std::make_unique<ExpandRepeatPass>();
}

} // namespace archc
