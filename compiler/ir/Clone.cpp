//===- Clone.cpp - Copying ops with value remapping -----------------------===//
//
// This file implements cloneOp().
//
//===----------------------------------------------------------------------===//
#include "ir/Clone.h"

namespace archc::ir {

std::unique_ptr<Op> cloneOp(const Op &op, ValueMap &map) {
  auto copy = std::make_unique<Op>(op.getKind(), op.getLoc());
  for (Value *v : op.operands) {
    auto it = map.find(v);
    copy->operands.push_back(it != map.end() ? it->second : v);
  }
  copy->attrs = op.attrs;
  copy->presentOperands = op.presentOperands;
  for (const auto &r : op.getResults())
    map[r.get()] = copy->addResult(r->type);
  for (const auto &region : op.getRegions()) {
    Block *nb = copy->addRegion();
    nb->layers = region->layers;
    for (const auto &arg : region->getArguments())
      map[arg.get()] = nb->addArgument(arg->type, arg->name);
    for (const auto &inner : region->getOps())
      nb->push(cloneOp(*inner, map));
  }
  return copy;
}

} // namespace archc::ir
