//===- LayerKeys.h - What makes one layer of a loop differ -----*- C++ -*-===//
//
// The layer loop evaluates each distinct layer body once: the expressions
// through which the loop variable enters the body (its layer keys) are
// evaluated for every layer, and layers with equal key values share a
// body. This file finds those expressions; Evaluator::execFor (in
// EvalLayerLoop.cpp) evaluates and compares them, and explains why that is
// sound.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IRGEN_LAYERKEYS_H
#define ARCHC_IRGEN_LAYERKEYS_H

#include "irgen/EvalValue.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace archc {

/// The key expressions of a layer-loop body.
struct LayerKeys {
  /// False when the body cannot be keyed (it assigns the loop variable or
  /// holds a nested loop): every layer is then evaluated.
  bool ok = true;
  /// The maximal pure scalar expressions that mention the loop variable
  /// (literals, the variable, names the body does not assign, operators,
  /// indexing, members and calls of pure functions), in every branch of
  /// the body; a use of the variable in any other context is a key itself.
  std::vector<const ast::Expr *> keys;
};

/// Finds the layer keys of loop `body` over variable `var`. Callee names
/// resolve as the evaluator resolves them: in `env` (the environment the
/// loop runs in), then the defs of `arch` (the arch whose code runs the
/// loop), then `globals` (the program's top-level defs), then the pure
/// built-ins. A function is pure when its body only binds names, branches,
/// checks and returns such expressions (no op, weight, scope, loop,
/// anonymous function or call of a parameter or local); recursion counts
/// as impure.
LayerKeys
findLayerKeys(const std::string &var, const std::vector<ast::StmtPtr> &body,
              const std::map<std::string, const ast::DefDecl *> &globals,
              std::shared_ptr<const ArchScope> arch, std::shared_ptr<Env> env);

} // namespace archc

#endif // ARCHC_IRGEN_LAYERKEYS_H
