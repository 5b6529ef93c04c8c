//===- UniformParamReads.h - Params every reader agrees on ------*- C++ -*-===//
//
// This file defines uniformParamReads, the analysis behind the storage
// layouts the lowering picks for weights (Linear weights stored [in, out],
// weights stored in the one shape every Reshape of them asks for): a
// property of each read of a value, then agreement over every read and over
// every param of one name, since one initializer serves them all.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_UNIFORMPARAMREADS_H
#define ARCHC_EMIT_UNIFORMPARAMREADS_H

#include "ir/IR.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace archc {

/// The params of `body` (its own ops, not nested blocks') whose every read,
/// anywhere under `body`, has one and the same property, keyed by the
/// param's result. `read(op, i)` is the property of `op` reading its operand
/// `i` (nullopt: a read that disqualifies the value); `eligible(param)`
/// filters the params. All params of one name, nested ones included, must
/// qualify with equal properties (a tied head may be a param of its own),
/// or none of them is returned.
template <typename T, typename Read, typename Eligible>
std::map<const ir::Value *, T> uniformParamReads(const ir::Block &body,
                                                 Read read, Eligible eligible) {
  std::map<const ir::Value *, std::optional<T>> byValue;
  ir::walk(body, [&](const ir::Op &op) {
    for (size_t i = 0; i < op.getNumOperands(); ++i) {
      std::optional<T> p = read(op, i);
      auto [it, fresh] = byValue.emplace(op.getOperand(i), p);
      if (!fresh && it->second != p)
        it->second.reset();
    }
  });
  std::map<std::string, std::optional<T>> byName;
  std::vector<const ir::Op *> candidates;
  ir::walk(body, [&](const ir::Op &op) {
    if (op.getKind() != ir::OpKind::Param)
      return;
    std::optional<T> p;
    if (auto it = byValue.find(op.getResult());
        it != byValue.end() && op.getParentBlock() == &body && eligible(op))
      p = it->second;
    auto [slot, fresh] = byName.emplace(op.attr<std::string>("name"), p);
    if (!fresh && slot->second != p)
      slot->second.reset();
    if (p)
      candidates.push_back(&op);
  });
  std::map<const ir::Value *, T> out;
  for (const ir::Op *op : candidates)
    if (const auto &p = byName[op->attr<std::string>("name")])
      out.emplace(op->getResult(), *p);
  return out;
}

} // namespace archc

#endif // ARCHC_EMIT_UNIFORMPARAMREADS_H
