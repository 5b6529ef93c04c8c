//===- Builtins.h - Signatures of built-in ops and functions ----*- C++ -*-===//
//
// This file declares the signatures shared by Sema (static arity and
// named-argument checks) and the Evaluator (binding and type checks):
//   - `op.<name>(...)`: compiler-known semantic ops, each creating an IR op;
//     their signatures derive from the op schemas (ir/OpSchema.h);
//   - plain built-in functions evaluated at compile time (`param`, `len`,
//     `min`, `get`, `sqrt`, ...).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_BUILTINS_H
#define ARCHC_FRONTEND_BUILTINS_H

#include <optional>
#include <string>
#include <vector>

namespace archc {

/// One parameter of a built-in: `type` is a language type name, possibly
/// ending in `?` (none accepted); `required` params have no default.
struct BuiltinParam {
  std::string name;
  std::string type;
  bool required = true;
};

struct BuiltinSignature {
  std::string name;
  std::vector<BuiltinParam> params;
  /// Accepts any number of extra positional arguments (none so far).
  bool variadic = false;
  std::string summary;
};

/// `op.<name>` signatures (derived from the op's schema: parameter k is
/// its schema's `signature[k]`); null when unknown.
const BuiltinSignature *lookupOpBuiltin(const std::string &name);
/// Plain built-in function signatures; null when unknown.
const BuiltinSignature *lookupFunctionBuiltin(const std::string &name);
/// All names, for "did you mean" suggestions.
std::vector<std::string> opBuiltinNames();
std::vector<std::string> functionBuiltinNames();

/// Returns the candidate closest to `name` by edit distance when it is close
/// enough to be a likely typo.
std::optional<std::string> suggestName(const std::string &name,
                                       const std::vector<std::string> &cands);

} // namespace archc

#endif // ARCHC_FRONTEND_BUILTINS_H
