//===- OpSchema.cpp - Schema registry, value checks, schema builder ------===//
//
// This file assembles the schemas the op family files define into one
// table indexed by OpKind, looks them up, checks attribute values against
// their specs, and implements SchemaBuilder.
//
//===----------------------------------------------------------------------===//
#include "ir/OpSchema.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace archc::ir {

const char *attrTypeName(AttrType t) {
  switch (t) {
  case AttrType::Bool:
    return "bool";
  case AttrType::Int:
    return "int";
  case AttrType::Float:
    return "float";
  case AttrType::String:
    return "string";
  case AttrType::Enum:
    return "enum";
  case AttrType::Identifier:
    return "identifier";
  case AttrType::DType:
    return "dtype";
  case AttrType::IntList:
    return "list of ints";
  case AttrType::DimList:
    return "list of dims";
  case AttrType::Dict:
    return "dict";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

namespace {
constexpr size_t kNumOpKinds = 0
#define ARCHC_OP(E, M, F) +1
#include "ir/Ops.def"
#undef ARCHC_OP
    ;

std::vector<OpSchema> buildTable() {
  SchemaList defined;
  addStructureSchemas(defined);
  addElementwiseSchemas(defined);
  addReduceSchemas(defined);
  addLinearSchemas(defined);
  addShapeSchemas(defined);
  addAttentionSchemas(defined);
  addRecurrentSchemas(defined);
  addStateSpaceSchemas(defined);
  addMoeSchemas(defined);
  addVisionSchemas(defined);
  std::vector<OpSchema> table(kNumOpKinds);
  std::vector<bool> seen(kNumOpKinds, false);
  for (OpSchema &s : defined) {
    size_t k = static_cast<size_t>(s.kind);
    if (seen[k])
      throw SchemaError(fmt::format("op '{}' has two schemas", s.mnemonic()));
    seen[k] = true;
    table[k] = std::move(s);
  }
  for (size_t k = 0; k < kNumOpKinds; ++k)
    if (!seen[k])
      throw SchemaError(fmt::format("op '{}' has no schema",
                                    mnemonic(static_cast<OpKind>(k))));
  return table;
}
} // namespace

const std::vector<OpSchema> &allOpSchemas() {
  // Never destroyed: a registry lives as long as the process, and tearing it
  // down at exit would only cost time.
  static const auto *table = new std::vector<OpSchema>(buildTable());
  return *table;
}

const OpSchema &opSchema(OpKind kind) {
  return allOpSchemas()[static_cast<size_t>(kind)];
}

const OpSchema *findLanguageOp(std::string_view name) {
  static const auto *byName = [] {
    auto *m = new std::map<std::string_view, const OpSchema *>;
    for (const OpSchema &s : allOpSchemas())
      if (s.inLanguage)
        m->emplace(s.mnemonic(), &s);
    return m;
  }();
  auto it = byName->find(name);
  return it == byName->end() ? nullptr : it->second;
}

namespace {
template <typename Spec>
std::optional<size_t> findByName(const std::vector<Spec> &v,
                                 std::string_view name) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].name == name)
      return i;
  return std::nullopt;
}
} // namespace

std::optional<size_t> OpSchema::findOperand(std::string_view name) const {
  return findByName(operands, name);
}
std::optional<size_t> OpSchema::findAttr(std::string_view name) const {
  return findByName(attrs, name);
}
std::optional<size_t> OpSchema::findResult(std::string_view name) const {
  return findByName(results, name);
}

size_t OpSchema::operandIndex(std::string_view name) const {
  if (auto k = findOperand(name))
    return *k;
  throw SchemaError(
      fmt::format("op '{}' declares no operand '{}'", mnemonic(), name));
}

const AttrSpec &OpSchema::attr(std::string_view name) const {
  if (auto k = findAttr(name))
    return attrs[*k];
  throw SchemaError(
      fmt::format("op '{}' declares no attribute '{}'", mnemonic(), name));
}

size_t OpSchema::resultIndex(std::string_view name) const {
  if (auto k = findResult(name))
    return *k;
  throw SchemaError(
      fmt::format("op '{}' declares no result '{}'", mnemonic(), name));
}

//===----------------------------------------------------------------------===//
// Attribute values
//===----------------------------------------------------------------------===//

namespace {
bool holdsType(AttrType t, const Attr &v) {
  switch (t) {
  case AttrType::Bool:
    return std::holds_alternative<bool>(v);
  case AttrType::Int:
    return std::holds_alternative<int64_t>(v);
  case AttrType::Float:
    return std::holds_alternative<double>(v);
  case AttrType::String:
  case AttrType::Enum:
  case AttrType::Identifier:
  case AttrType::DType:
    return std::holds_alternative<std::string>(v);
  case AttrType::IntList:
    return std::holds_alternative<std::vector<int64_t>>(v);
  case AttrType::DimList:
    return std::holds_alternative<std::vector<SymExpr>>(v);
  case AttrType::Dict:
    return std::holds_alternative<std::shared_ptr<AttrDict>>(v);
  }
  return false;
}

std::string joinNames(const std::vector<std::string> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i];
  return s;
}

/// What a value of the spec's type is called in a message.
std::string expected(const AttrSpec &spec) {
  switch (spec.type) {
  case AttrType::Bool:
    return "a bool";
  case AttrType::Int:
    return "an int";
  case AttrType::Float:
    return "a float";
  case AttrType::String:
  case AttrType::Identifier:
    return "a string";
  case AttrType::DType:
    return "a dtype name";
  case AttrType::Enum:
    return joinNames(spec.allowed);
  case AttrType::IntList:
    return "a list of ints";
  case AttrType::DimList:
    return "a list of dims";
  case AttrType::Dict:
    return "a dict";
  }
  return "?";
}
} // namespace

std::optional<std::string> checkAttrValue(const AttrSpec &spec,
                                          const Attr &value) {
  if (!holdsType(spec.type, value))
    return fmt::format("{} must be {}, got {}", spec.name, expected(spec),
                       attrStr(value));
  switch (spec.type) {
  case AttrType::Enum: {
    const std::string &s = std::get<std::string>(value);
    for (const std::string &a : spec.allowed)
      if (a == s)
        return std::nullopt;
    return fmt::format("{} must be {}, got \"{}\"", spec.name,
                       joinNames(spec.allowed), s);
  }
  case AttrType::Identifier: {
    const std::string &s = std::get<std::string>(value);
    bool plain = !s.empty();
    for (char c : s)
      plain &= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c >= '0' && c <= '9') || c == '_';
    if (!plain)
      return fmt::format("{} '{}' must be a plain word (letters, digits, "
                         "'_') such as \"{}\"",
                         spec.name, s,
                         spec.defaultValue
                             ? std::get<std::string>(*spec.defaultValue)
                             : std::string("key"));
    return std::nullopt;
  }
  case AttrType::DType: {
    const std::string &s = std::get<std::string>(value);
    DType t = parseDType(s);
    if (t == DType::Unknown || s != dtypeName(t))
      return fmt::format("unknown dtype '{}'", s);
    return std::nullopt;
  }
  case AttrType::Int:
  case AttrType::Float: {
    double v = spec.type == AttrType::Int
                   ? static_cast<double>(std::get<int64_t>(value))
                   : std::get<double>(value);
    // A NaN or infinite argument makes the op's output non-finite; a zero
    // factor makes it constant (docs/limits.md, "Config values").
    if (spec.type == AttrType::Float && spec.origin == Origin::Language &&
        !std::isfinite(v))
      return fmt::format("{} must be a finite number, got {}", spec.name,
                         attrStr(value));
    if (spec.nonZero && v == 0)
      return fmt::format("{} must not be 0 (the op's output would be "
                         "constant)",
                         spec.name);
    if (!spec.min)
      return std::nullopt;
    bool ok = spec.minExclusive ? v > *spec.min : v >= *spec.min;
    if (ok)
      return std::nullopt;
    return fmt::format("{} must be {} {}, got {}", spec.name,
                       spec.minExclusive ? "greater than" : "at least",
                       attrStr(spec.type == AttrType::Int
                                   ? Attr(static_cast<int64_t>(*spec.min))
                                   : Attr(*spec.min)),
                       attrStr(value));
  }
  case AttrType::IntList:
    if (spec.nonEmpty && std::get<std::vector<int64_t>>(value).empty())
      return fmt::format("{} must not be empty", spec.name);
    return std::nullopt;
  case AttrType::DimList:
    if (spec.nonEmpty && std::get<std::vector<SymExpr>>(value).empty())
      return fmt::format("{} must not be empty", spec.name);
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

//===----------------------------------------------------------------------===//
// SchemaBuilder
//===----------------------------------------------------------------------===//

SchemaBuilder::SchemaBuilder(OpKind kind, std::string summary) {
  s.kind = kind;
  s.summary = std::move(summary);
}

SchemaBuilder &SchemaBuilder::describe(std::string text) {
  s.description = std::move(text);
  return *this;
}

SchemaBuilder &SchemaBuilder::language() {
  s.inLanguage = true;
  return *this;
}

namespace {
void addArg(OpSchema &s, ArgRef::Kind kind, size_t index) {
  s.signature.push_back({kind, index});
}
} // namespace

SchemaBuilder &SchemaBuilder::operand(std::string name, std::string summary) {
  s.operands.push_back({std::move(name), Origin::Language, false, false, "",
                        std::move(summary)});
  addArg(s, ArgRef::Kind::Operand, s.operands.size() - 1);
  return *this;
}

SchemaBuilder &SchemaBuilder::optOperand(std::string name, std::string summary,
                                         std::string needs) {
  s.operands.push_back({std::move(name), Origin::Language, true, false,
                        std::move(needs), std::move(summary)});
  addArg(s, ArgRef::Kind::Operand, s.operands.size() - 1);
  return *this;
}

SchemaBuilder &SchemaBuilder::variadicOperand(std::string name,
                                              std::string summary,
                                              Origin origin) {
  s.operands.push_back(
      {std::move(name), origin, false, true, "", std::move(summary)});
  if (origin == Origin::Language)
    addArg(s, ArgRef::Kind::Operand, s.operands.size() - 1);
  return *this;
}

SchemaBuilder &SchemaBuilder::passOperand(std::string name,
                                          std::string summary) {
  s.operands.push_back(
      {std::move(name), Origin::Pass, true, false, "", std::move(summary)});
  return *this;
}

SchemaBuilder &SchemaBuilder::attr(std::string name, AttrType type,
                                   std::string summary) {
  AttrSpec a;
  a.name = std::move(name);
  a.type = type;
  a.summary = std::move(summary);
  s.attrs.push_back(std::move(a));
  addArg(s, ArgRef::Kind::Attr, s.attrs.size() - 1);
  return *this;
}

SchemaBuilder &SchemaBuilder::attr(std::string name, AttrType type,
                                   Attr defaultValue, std::string summary) {
  attr(std::move(name), type, std::move(summary));
  lastAttr().defaultValue = std::move(defaultValue);
  return *this;
}

SchemaBuilder &SchemaBuilder::optAttr(std::string name, AttrType type,
                                      std::string summary) {
  attr(std::move(name), type, std::move(summary));
  lastAttr().optional = true;
  return *this;
}

SchemaBuilder &SchemaBuilder::builderAttr(std::string name, AttrType type,
                                          std::string summary) {
  AttrSpec a;
  a.name = std::move(name);
  a.type = type;
  a.origin = Origin::Builder;
  a.summary = std::move(summary);
  s.attrs.push_back(std::move(a));
  return *this;
}

SchemaBuilder &SchemaBuilder::passAttr(std::string name, AttrType type,
                                       std::string summary) {
  AttrSpec a;
  a.name = std::move(name);
  a.type = type;
  a.origin = Origin::Pass;
  a.optional = true;
  a.summary = std::move(summary);
  s.attrs.push_back(std::move(a));
  return *this;
}

AttrSpec &SchemaBuilder::lastAttr() {
  if (s.attrs.empty())
    throw SchemaError(fmt::format("op '{}': a constraint before any attribute",
                                  s.mnemonic()));
  return s.attrs.back();
}

SchemaBuilder &SchemaBuilder::allowed(std::vector<std::string> values) {
  lastAttr().allowed = std::move(values);
  return *this;
}

SchemaBuilder &SchemaBuilder::atLeast(double bound) {
  lastAttr().min = bound;
  return *this;
}

SchemaBuilder &SchemaBuilder::above(double bound) {
  lastAttr().min = bound;
  lastAttr().minExclusive = true;
  return *this;
}

SchemaBuilder &SchemaBuilder::nonZero() {
  lastAttr().nonZero = true;
  return *this;
}

SchemaBuilder &SchemaBuilder::nonEmpty() {
  lastAttr().nonEmpty = true;
  return *this;
}

SchemaBuilder &SchemaBuilder::honouredKeys(
    std::function<std::vector<std::string>(const AttrDict &)> keys) {
  lastAttr().honouredKeys = std::move(keys);
  return *this;
}

SchemaBuilder &SchemaBuilder::result(std::string name, std::string summary) {
  s.results.push_back(
      {std::move(name), Origin::Language, "", false, std::move(summary)});
  return *this;
}

SchemaBuilder &SchemaBuilder::variadicResults(std::string name,
                                              std::string countAttr,
                                              std::string summary) {
  s.results.push_back({std::move(name), Origin::Language, std::move(countAttr),
                       false, std::move(summary)});
  return *this;
}

SchemaBuilder &SchemaBuilder::passResult(std::string name,
                                         std::string summary) {
  s.results.push_back(
      {std::move(name), Origin::Pass, "", false, std::move(summary)});
  return *this;
}

SchemaBuilder &SchemaBuilder::resultPerOperand(std::string name,
                                               std::string summary) {
  s.results.push_back(
      {std::move(name), Origin::Builder, "", true, std::move(summary)});
  return *this;
}

SchemaBuilder &SchemaBuilder::region(std::string name,
                                     std::vector<std::string> blockArgs,
                                     std::vector<std::string> indices,
                                     std::string summary) {
  s.regions.push_back({std::move(name), std::move(blockArgs),
                       std::move(indices), std::move(summary)});
  addArg(s, ArgRef::Kind::Region, s.regions.size() - 1);
  return *this;
}

SchemaBuilder &SchemaBuilder::repeatedRegion(std::string name,
                                             std::string summary) {
  s.regions.push_back({std::move(name), {}, {}, std::move(summary), true});
  return *this;
}

SchemaBuilder &SchemaBuilder::perLayerState() {
  s.perLayerState = true;
  return *this;
}
SchemaBuilder &SchemaBuilder::notInExpertBody() {
  s.notInExpertBody = true;
  return *this;
}
SchemaBuilder &SchemaBuilder::verify(VerifyRule rule) {
  s.verify = rule;
  return *this;
}
SchemaBuilder &SchemaBuilder::infer(InferRule rule) {
  s.infer = rule;
  return *this;
}
SchemaBuilder &SchemaBuilder::cost(CostRule rule) {
  s.cost = rule;
  return *this;
}
SchemaBuilder &SchemaBuilder::costHandlesDensity() {
  s.costHandlesDensity = true;
  return *this;
}
SchemaBuilder &SchemaBuilder::denseResults() {
  s.denseResults = true;
  return *this;
}
SchemaBuilder &SchemaBuilder::density(DensityRule rule) {
  s.density = rule;
  return *this;
}
SchemaBuilder &SchemaBuilder::constantState(StateTypeRule rule, bool float32) {
  s.stateType = rule;
  s.stateInFloat32 = float32;
  return *this;
}

} // namespace archc::ir
