//===- Builtins.cpp - Signatures of built-in ops and functions ------------===//
//
// This file derives the `op.*` signatures from the op schemas, holds the
// table of compile-time built-in functions, and the typo suggester.
//
//===----------------------------------------------------------------------===//
#include "frontend/Builtins.h"

#include "ir/OpSchema.h"

#include <algorithm>
#include <map>

namespace archc {

namespace {

BuiltinParam req(std::string n, std::string t) { return {n, t, true}; }
BuiltinParam opt(std::string n, std::string t) { return {n, t, false}; }

/// The language type of one `op.*` argument, from its schema entry.
std::string argType(const ir::OpSchema &s, const ir::ArgRef &r) {
  using ir::AttrType;
  if (r.kind == ir::ArgRef::Kind::Region)
    return "function";
  if (r.kind == ir::ArgRef::Kind::Operand) {
    const ir::OperandSpec &o = s.operands[r.index];
    return o.variadic ? "list" : o.optional ? "tensor?" : "tensor";
  }
  const ir::AttrSpec &a = s.attrs[r.index];
  std::string t;
  switch (a.type) {
  case AttrType::Bool:
    t = "bool";
    break;
  case AttrType::Int:
    t = "int";
    break;
  case AttrType::Float:
    t = "float";
    break;
  case AttrType::String:
  case AttrType::Enum:
  case AttrType::Identifier:
  case AttrType::DType:
    t = "string";
    break;
  case AttrType::IntList:
  case AttrType::DimList:
    t = "list";
    break;
  case AttrType::Dict:
    t = "dict";
    break;
  }
  return a.optional ? t + "?" : t;
}

bool argRequired(const ir::OpSchema &s, const ir::ArgRef &r) {
  if (r.kind == ir::ArgRef::Kind::Operand)
    return !s.operands[r.index].optional;
  if (r.kind == ir::ArgRef::Kind::Attr)
    return s.attrs[r.index].required();
  return true;
}

const std::vector<BuiltinSignature> &opTable() {
  // Never destroyed (see allOpSchemas()).
  static const auto *table = new std::vector<BuiltinSignature>([] {
    std::vector<BuiltinSignature> t;
    for (const ir::OpSchema &s : ir::allOpSchemas()) {
      if (!s.inLanguage)
        continue;
      BuiltinSignature sig{s.mnemonic(), {}, false, s.summary};
      for (const ir::ArgRef &r : s.signature) {
        std::string name =
            r.kind == ir::ArgRef::Kind::Operand ? s.operands[r.index].name
            : r.kind == ir::ArgRef::Kind::Attr  ? s.attrs[r.index].name
                                                : s.regions[r.index].name;
        sig.params.push_back({name, argType(s, r), argRequired(s, r)});
      }
      t.push_back(std::move(sig));
    }
    return t;
  }());
  return *table;
}

const std::vector<BuiltinSignature> &functionTable() {
  static const std::vector<BuiltinSignature> table = {
      {"param",
       {req("name", "string"), req("shape", "list"), opt("dtype", "string?"),
        opt("buffer", "bool?")},
       false,
       "declares a checkpoint weight under the current name scope (buffer: "
       "a checkpoint tensor that is not a parameter)"},
      {"len", {req("x", "any")}, false, "length of a list, dict or string"},
      {"min", {req("a", "any"), req("b", "any")}, false, "smaller number"},
      {"max", {req("a", "any"), req("b", "any")}, false, "larger number"},
      {"int", {req("x", "any")}, false, "convert to int (truncates)"},
      {"float", {req("x", "any")}, false, "convert to float"},
      {"str", {req("x", "any")}, false, "convert to string"},
      {"type_of",
       {req("x", "any")},
       false,
       "the name of a value's type: \"int\", \"float\", \"bool\", "
       "\"string\", \"list\", \"dict\", \"none\", \"tensor\", ..."},
      {"get",
       {req("d", "dict?"), req("key", "string"), opt("default", "any")},
       false,
       "dict lookup with default (none dict gives the default)"},
      {"model_dtype",
       {},
       false,
       "the model's activation dtype (config torch_dtype or --dtype), e.g. "
       "\"bf16\""},
      {"set",
       {req("d", "dict?"), req("key", "string"), req("value", "any")},
       false,
       "a copy of the dict (none: an empty one) with key set"},
      {"without",
       {req("d", "dict?"), req("keys", "list")},
       false,
       "a copy of the dict without the given keys (none stays none)"},
      {"sqrt", {req("x", "float")}, false, "square root of a number"},
      {"log", {req("x", "float")}, false, "natural logarithm of a number"},
      {"exp", {req("x", "float")}, false, "e to the power of a number"},
      {"pow", {req("a", "float"), req("b", "float")}, false, "a to the b"},
      {"floor", {req("x", "float")}, false, "round down to int"},
      {"ceil", {req("x", "float")}, false, "round up to int"},
  };
  return table;
}

/// Signatures of a table by name.
using SignatureIndex = std::map<std::string_view, const BuiltinSignature *>;
SignatureIndex indexByName(const std::vector<BuiltinSignature> &t) {
  SignatureIndex m;
  for (const BuiltinSignature &s : t)
    m.emplace(s.name, &s);
  return m;
}

const BuiltinSignature *find(const SignatureIndex &index,
                             const std::string &name) {
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

/// Optimal string alignment distance: insertions, deletions, substitutions
/// and transpositions of adjacent characters each cost 1 (`esp` is one edit
/// from `eps`).
size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<std::vector<size_t>> d(a.size() + 1,
                                     std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

} // namespace

const BuiltinSignature *lookupOpBuiltin(const std::string &name) {
  static const auto *index = new SignatureIndex(indexByName(opTable()));
  return find(*index, name);
}
const BuiltinSignature *lookupFunctionBuiltin(const std::string &name) {
  static const auto *index = new SignatureIndex(indexByName(functionTable()));
  return find(*index, name);
}

std::vector<std::string> opBuiltinNames() {
  std::vector<std::string> n;
  for (auto &s : opTable())
    n.push_back(s.name);
  return n;
}
std::vector<std::string> functionBuiltinNames() {
  std::vector<std::string> n;
  for (auto &s : functionTable())
    n.push_back(s.name);
  return n;
}

std::optional<std::string> suggestName(const std::string &name,
                                       const std::vector<std::string> &cands) {
  std::optional<std::string> best;
  size_t bestDist = 0;
  for (const std::string &c : cands) {
    if (c == name)
      continue;
    size_t d = editDistance(name, c);
    size_t limit = std::max<size_t>(1, std::min(name.size(), c.size()) / 3);
    if (d <= limit && (!best || d < bestDist)) {
      best = c;
      bestDist = d;
    }
  }
  return best;
}

} // namespace archc
