//===- IR.cpp - archc's typed intermediate representation -----------------===//
//
// This file implements the op table lookups, attribute printing, and the
// block/op/module helpers declared in IR.h.
//
//===----------------------------------------------------------------------===//
#include "ir/IR.h"

#include "ir/OpSchema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace archc::ir {

const char *mnemonic(OpKind k) {
  switch (k) {
#define ARCHC_OP(E, M, F)                                                      \
  case OpKind::E:                                                              \
    return M;
#include "ir/Ops.def"
#undef ARCHC_OP
  }
  return "?";
}

OpFamily family(OpKind k) {
  switch (k) {
#define ARCHC_OP(E, M, F)                                                      \
  case OpKind::E:                                                              \
    return OpFamily::F;
#include "ir/Ops.def"
#undef ARCHC_OP
  }
  return OpFamily::Leaf;
}

bool lookupOpKind(const std::string &m, OpKind &out) {
#define ARCHC_OP(E, M, F)                                                      \
  if (m == M) {                                                                \
    out = OpKind::E;                                                           \
    return true;                                                               \
  }
#include "ir/Ops.def"
#undef ARCHC_OP
  return false;
}

static std::string floatStr(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eni") == std::string::npos)
    s += ".0";
  return s;
}

static std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

template <typename T, typename F>
static std::string list(const std::vector<T> &v, F f) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + f(v[i]);
  return s + "]";
}

std::string attrStr(const Attr &a) {
  struct Printer {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return floatStr(d); }
    std::string operator()(const std::string &s) const { return quote(s); }
    std::string operator()(const std::vector<int64_t> &v) const {
      return list(v, [](int64_t i) { return std::to_string(i); });
    }
    std::string operator()(const std::vector<double> &v) const {
      return list(v, floatStr);
    }
    std::string operator()(const std::vector<std::string> &v) const {
      return list(v, quote);
    }
    std::string operator()(const std::vector<SymExpr> &v) const {
      return list(v, [](const SymExpr &e) { return e.str(); });
    }
    std::string operator()(const std::shared_ptr<AttrDict> &d) const {
      std::string s = "{";
      bool first = true;
      for (auto &[k, v] : d->entries) {
        s += (first ? "" : ", ") + k + " = " + attrStr(v);
        first = false;
      }
      return s + "}";
    }
  };
  return std::visit(Printer{}, a);
}

Value *Block::addArgument(TensorType type, std::string name) {
  auto v = std::make_unique<Value>();
  v->type = std::move(type);
  v->name = std::move(name);
  v->ownerBlock = this;
  v->index = static_cast<unsigned>(args.size());
  args.push_back(std::move(v));
  return args.back().get();
}

Op *Block::push(std::unique_ptr<Op> op) {
  op->parent = this;
  ops.push_back(std::move(op));
  return ops.back().get();
}

Op *Block::insert(std::list<std::unique_ptr<Op>>::iterator pos,
                  std::unique_ptr<Op> op) {
  op->parent = this;
  return ops.insert(pos, std::move(op))->get();
}

Op *Block::getTerminator() const {
  return ops.empty() ? nullptr : ops.back().get();
}

Value *Op::addResult(TensorType type) {
  auto v = std::make_unique<Value>();
  v->type = std::move(type);
  v->defOp = this;
  v->index = static_cast<unsigned>(results.size());
  results.push_back(std::move(v));
  return results.back().get();
}

Block *Op::addRegion() {
  auto b = std::make_unique<Block>();
  b->parentOp = this;
  regions.push_back(std::move(b));
  return regions.back().get();
}

Block *Op::adoptRegion(std::unique_ptr<Block> b) {
  b->parentOp = this;
  regions.push_back(std::move(b));
  return regions.back().get();
}

//===----------------------------------------------------------------------===//
// Named operands and typed attributes (checked against the op's schema)
//===----------------------------------------------------------------------===//

namespace {
/// Position of schema operand `k` in the compact operand list, given which
/// optional operands are present; SIZE_MAX when absent.
size_t operandPosition(const OpSchema &s, uint32_t present, size_t k) {
  size_t pos = 0;
  for (size_t j = 0; j < k; ++j) {
    const OperandSpec &o = s.operands[j];
    if (o.variadic)
      throw SchemaError(fmt::format("op '{}': operand '{}' follows the list "
                                    "operand '{}'",
                                    s.mnemonic(), s.operands[k].name, o.name));
    if (!(o.optional || o.origin == Origin::Pass) || (present >> j & 1))
      ++pos;
  }
  const OperandSpec &o = s.operands[k];
  if ((o.optional || o.origin == Origin::Pass) && !(present >> k & 1))
    return SIZE_MAX;
  return pos;
}
} // namespace

Value *Op::operand(std::string_view name) const {
  const OpSchema &s = opSchema(kind);
  size_t k = s.operandIndex(name);
  if (s.operands[k].variadic)
    throw SchemaError(fmt::format("op '{}': '{}' is a list of operands; read "
                                  "`operands`",
                                  s.mnemonic(), name));
  size_t pos = operandPosition(s, presentOperands, k);
  if (pos == SIZE_MAX)
    return nullptr;
  if (pos >= operands.size())
    throw SchemaError(fmt::format("op '{}' has {} operands; its operand '{}' "
                                  "would be at {}",
                                  s.mnemonic(), operands.size(), name, pos));
  return operands[pos];
}

void Op::setOperand(std::string_view name, Value *v) {
  const OpSchema &s = opSchema(kind);
  size_t k = s.operandIndex(name);
  const OperandSpec &o = s.operands[k];
  if (o.variadic)
    throw SchemaError(
        fmt::format("op '{}': '{}' is a list of operands", s.mnemonic(), name));
  bool toggled = o.optional || o.origin == Origin::Pass;
  if (toggled && !(presentOperands >> k & 1)) {
    presentOperands |= uint32_t(1) << k;
    size_t pos = operandPosition(s, presentOperands, k);
    if (pos > operands.size())
      throw SchemaError(fmt::format("op '{}': operand '{}' added before the "
                                    "operands it follows",
                                    s.mnemonic(), name));
    operands.insert(operands.begin() + static_cast<std::ptrdiff_t>(pos), v);
    return;
  }
  size_t pos = operandPosition(s, presentOperands, k);
  if (pos == operands.size())
    operands.push_back(v);
  else if (pos < operands.size())
    operands[pos] = v;
  else
    throw SchemaError(fmt::format("op '{}': operand '{}' set before the "
                                  "operands it follows",
                                  s.mnemonic(), name));
}

Value *Op::result(std::string_view name) const {
  size_t k = opSchema(kind).resultIndex(name);
  return k < results.size() ? results[k].get() : nullptr;
}

const Attr *Op::lookupAttr(std::string_view name) const {
  // Only declared attributes are ever stored (setAttr checks), so a stored
  // one needs no schema lookup; an absent one is checked against the schema
  // (an undeclared name throws) and read from its default.
  auto it = attrs.find(name);
  if (it != attrs.end())
    return &it->second;
  const AttrSpec &spec = opSchema(kind).attr(name);
  return spec.defaultValue ? &*spec.defaultValue : nullptr;
}

void Op::attrAccessError(std::string_view name, bool present) const {
  throw SchemaError(
      present ? fmt::format("op '{}': attribute '{}' read with the wrong type",
                            mnemonic(kind), name)
              : fmt::format("op '{}': attribute '{}' is absent and has no "
                            "default (read it with optAttr)",
                            mnemonic(kind), name));
}

bool Op::hasAttr(std::string_view name) const {
  if (attrs.count(name))
    return true;
  opSchema(kind).attr(name); // an undeclared name throws
  return false;
}

void Op::setAttr(std::string_view name, Attr value) {
  attrs[opSchema(kind).attr(name).name] = std::move(value);
}

int64_t WeightDecl::count() const {
  int64_t n = layers.empty() ? 1 : static_cast<int64_t>(layers.size());
  return experts ? n * experts : n;
}

std::string instantiatePattern(const std::string &pattern, int64_t layer,
                               int64_t expert) {
  std::string out;
  out.reserve(pattern.size() + 8);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '{' && i + 2 < pattern.size() && pattern[i + 2] == '}') {
      char c = pattern[i + 1];
      if (c == 'i' && layer >= 0) {
        out += std::to_string(layer);
        i += 2;
        continue;
      }
      if (c == 'e' && expert >= 0) {
        out += std::to_string(expert);
        i += 2;
        continue;
      }
    }
    out += pattern[i];
  }
  return out;
}

std::string WeightDecl::instantiate(int64_t layer, int64_t expert) const {
  return instantiatePattern(pattern, layer, expert);
}

const WeightDecl *Module::findWeight(const std::string &pattern) const {
  for (const WeightDecl &w : weights)
    if (w.pattern == pattern)
      return &w;
  return nullptr;
}

std::string formatLayers(const std::vector<int64_t> &layers) {
  if (layers.empty())
    return "[]";
  if (layers.size() == 1)
    return fmt::format("[{}]", layers[0]);
  int64_t step = layers[1] - layers[0];
  bool arithmetic = step > 0;
  for (size_t i = 2; i < layers.size() && arithmetic; ++i)
    arithmetic = layers[i] - layers[i - 1] == step;
  if (arithmetic) {
    int64_t end = layers.back() + 1;
    if (step == 1)
      return fmt::format("{}..{}", layers.front(), end);
    return fmt::format("{}..{} step {}", layers.front(), end, step);
  }
  std::string s = "[";
  for (size_t i = 0; i < layers.size(); ++i)
    s += (i ? ", " : "") + std::to_string(layers[i]);
  return s + "]";
}

} // namespace archc::ir
