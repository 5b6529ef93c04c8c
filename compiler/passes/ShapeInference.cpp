//===- ShapeInference.cpp - Symbolic shape inference ----------------------===//
//
// This file implements the shape-inference pass. Algorithm (per block):
// every op waits on the values it reads whose type is unknown (its operands
// and, for region ops, the outer values its regions read); ops with nothing
// to wait on are ready. Ready ops are taken in order; each op family's rule
// (OpRules) computes result types; a region op first types its region
// arguments, infers its regions recursively, then its results. Results
// becoming known wake their users. Ops left waiting when the worklist drains
// are reported. Derived types are cleared first, so the pass can rerun after
// a pass that changed the graph.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "passes/Passes.h"

#include <fmt/format.h>

#include <deque>
#include <map>
#include <set>

namespace archc {

using namespace ir;

namespace {

bool isLeaf(const Op &op) {
  return op.getKind() == OpKind::Param || op.getKind() == OpKind::Const ||
         op.getKind() == OpKind::StateIn;
}

void clearDerivedTypes(Block &b) {
  for (auto &op : b.getOps()) {
    if (!isLeaf(*op))
      for (auto &r : op->getResults())
        r->type = TensorType::unknown();
    for (auto &region : op->getRegions()) {
      for (auto &arg : region->getArguments())
        arg->type = TensorType::unknown();
      clearDerivedTypes(*region);
    }
  }
}

/// Values an op reads, including those its regions read from outside.
void collectReads(const Op &op, std::set<const Value *> &reads,
                  std::set<const Value *> &inner) {
  for (Value *v : op.operands)
    if (!inner.count(v))
      reads.insert(v);
  for (const auto &region : op.getRegions()) {
    for (const auto &a : region->getArguments())
      inner.insert(a.get());
    for (const auto &o : region->getOps()) {
      collectReads(*o, reads, inner);
      for (const auto &r : o->getResults())
        inner.insert(r.get());
    }
  }
}

class ShapeInferencePass : public Pass {
public:
  std::string_view getArgument() const override { return "shape-inference"; }
  std::string_view getSummary() const override {
    return "infer dtypes and symbolic shapes";
  }

  bool run(Module &m, PassContext &ctx) override {
    clearDerivedTypes(m.graph.body);
    return inferBlock(m.graph.body, ctx.diags);
  }

private:
  bool inferRegionOp(Op &op, DiagnosticEngine &diags) {
    if (op.getKind() == OpKind::Repeat) {
      for (auto &region : op.getRegions()) {
        for (size_t i = 0; i < op.getNumOperands(); ++i)
          region->getArgument(i)->type = op.getOperand(i)->type;
        if (!inferBlock(*region, diags))
          return false;
        const Op *y = region->getTerminator();
        for (size_t i = 0; i < op.getNumOperands(); ++i) {
          const TensorType &in = op.getOperand(i)->type;
          const TensorType &out = y->getOperand(i)->type;
          if (in != out) {
            reportOpError(
                diags, op,
                fmt::format("layers {} change carried value '{}' from {} to "
                            "{}; a layer must keep the type of what it "
                            "carries",
                            formatLayers(region->layers),
                            region->getArgument(i)->name, in.str(), out.str()));
            return false;
          }
        }
      }
      for (size_t i = 0; i < op.getNumResults(); ++i)
        op.getResult(i)->type = op.getOperand(i)->type;
      return true;
    }
    if (op.getKind() == OpKind::Experts) {
      Block &body = *op.getRegions()[0];
      body.getArgument(0)->type = op.getOperand(0)->type;
      if (!inferBlock(body, diags))
        return false;
      return inferOpTypes(op, diags);
    }
    reportOpError(diags, op, "unexpected region op");
    return false;
  }

  bool inferBlock(Block &b, DiagnosticEngine &diags) {
    std::map<const Value *, std::vector<Op *>> users;
    std::map<Op *, size_t> waiting;
    std::deque<Op *> ready;
    size_t total = 0;
    for (auto &opPtr : b.getOps()) {
      Op *op = opPtr.get();
      ++total;
      std::set<const Value *> reads, inner;
      collectReads(*op, reads, inner);
      size_t unknown = 0;
      for (const Value *v : reads)
        if (!v->type.known) {
          users[v].push_back(op);
          ++unknown;
        }
      waiting[op] = unknown;
      if (unknown == 0)
        ready.push_back(op);
    }
    size_t done = 0;
    while (!ready.empty()) {
      Op *op = ready.front();
      ready.pop_front();
      bool ok = op->getRegions().empty() ? inferOpTypes(*op, diags)
                                         : inferRegionOp(*op, diags);
      if (!ok)
        return false;
      ++done;
      for (auto &r : op->getResults()) {
        if (!r->type.known)
          continue;
        for (Op *u : users[r.get()])
          if (--waiting[u] == 0)
            ready.push_back(u);
      }
    }
    if (done != total) {
      for (auto &opPtr : b.getOps())
        if (waiting[opPtr.get()] != 0) {
          reportOpError(diags, *opPtr,
                        fmt::format("could not infer the types of {} op(s) "
                                    "starting here",
                                    total - done));
          break;
        }
      return false;
    }
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createShapeInferencePass() {
  return std::make_unique<ShapeInferencePass>();
}

} // namespace archc
