//===- IR.cpp - archc's typed intermediate representation -----------------===//
//
// This file implements the op table lookups, attribute printing, and the
// block/op/module helpers declared in IR.h.
//
//===----------------------------------------------------------------------===//
#include "ir/IR.h"

#include <fmt/format.h>

#include <algorithm>

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

int64_t Op::getInt(const std::string &n, int64_t dflt) const {
  if (auto *v = getAttr<int64_t>(n))
    return *v;
  return dflt;
}

double Op::getFloat(const std::string &n, double dflt) const {
  if (auto *v = getAttr<double>(n))
    return *v;
  if (auto *v = getAttr<int64_t>(n))
    return static_cast<double>(*v);
  return dflt;
}

bool Op::getBool(const std::string &n, bool dflt) const {
  if (auto *v = getAttr<bool>(n))
    return *v;
  return dflt;
}

std::string Op::getString(const std::string &n, const std::string &dflt) const {
  if (auto *v = getAttr<std::string>(n))
    return *v;
  return dflt;
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
