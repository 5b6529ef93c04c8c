//===- EvalConversions.cpp - Values as types and attributes ---------------===//
#include "irgen/Evaluator.h"

#include <fmt/format.h>

#include <cmath>

namespace archc {

bool Evaluator::coerce(EvalValue &v, const ast::TypeRef &type) {
  if (v.isPoison())
    return true;
  if (v.isNone())
    return type.optional || type.name == "any";
  const std::string &t = type.name;
  if (t == "any")
    return true;
  if (t == "int") {
    if (v.isInt()) {
      v = EvalValue::integer(v.getInt());
      return true;
    }
    // Integral floats (4096.0 in a config) are accepted as ints.
    if (v.getKind() == EvalValue::Kind::Float &&
        std::floor(v.getNumber()) == v.getNumber() &&
        std::fabs(v.getNumber()) < 9.0e15) {
      v = EvalValue::integer(static_cast<int64_t>(v.getNumber()));
      return true;
    }
    return false;
  }
  if (t == "float") {
    if (v.isNumber()) {
      v = EvalValue::floating(v.getNumber());
      return true;
    }
    return false;
  }
  if (t == "bool")
    return v.getKind() == EvalValue::Kind::Bool;
  if (t == "string")
    return v.getKind() == EvalValue::Kind::String;
  if (t == "dict")
    return v.getKind() == EvalValue::Kind::Dict;
  if (t == "tensor")
    return v.isTensor();
  if (t == "function")
    return v.getKind() == EvalValue::Kind::Function;
  if (t == "dim")
    return v.getKind() == EvalValue::Kind::Dim || v.isInt();
  if (t == "list") {
    if (v.getKind() != EvalValue::Kind::List)
      return false;
    if (!type.elem)
      return true;
    std::vector<EvalValue> elems = v.getList();
    for (EvalValue &e : elems)
      if (!coerce(e, *type.elem))
        return false;
    v = EvalValue::list(std::move(elems));
    return true;
  }
  return false;
}

bool Evaluator::toAttr(const EvalValue &v, ir::Attr &out) {
  switch (v.getKind()) {
  case EvalValue::Kind::Bool:
    out = v.getBool();
    return true;
  case EvalValue::Kind::Int:
  case EvalValue::Kind::Index:
    if (!v.isInt())
      return false;
    out = v.getInt();
    return true;
  case EvalValue::Kind::Float:
    out = v.getNumber();
    return true;
  case EvalValue::Kind::String:
    out = v.getString();
    return true;
  case EvalValue::Kind::List: {
    const auto &l = v.getList();
    bool allInt = true, allNum = true, allStr = true;
    for (const EvalValue &e : l) {
      allInt &= e.isInt();
      allNum &= e.isNumber();
      allStr &= e.getKind() == EvalValue::Kind::String;
    }
    if (allInt) {
      std::vector<int64_t> r;
      for (const EvalValue &e : l)
        r.push_back(e.getInt());
      out = r;
      return true;
    }
    if (allNum) {
      std::vector<double> r;
      for (const EvalValue &e : l)
        r.push_back(e.getNumber());
      out = r;
      return true;
    }
    if (allStr) {
      std::vector<std::string> r;
      for (const EvalValue &e : l)
        r.push_back(e.getString());
      out = r;
      return true;
    }
    return false;
  }
  case EvalValue::Kind::Dict: {
    auto d = std::make_shared<ir::AttrDict>();
    for (auto &[k, e] : v.getDict()) {
      if (e.isNone())
        continue;
      ir::Attr a;
      if (!toAttr(e, a))
        return false;
      d->entries[k] = a;
    }
    out = d;
    return true;
  }
  default:
    return false;
  }
}

std::string Evaluator::interpolate(const std::string &text, SourceRange range,
                                   const std::shared_ptr<Env> &env,
                                   bool keepIndices) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{') {
      out += text[i];
      continue;
    }
    size_t close = text.find('}', i);
    if (close == std::string::npos) {
      out += text.substr(i);
      break;
    }
    std::string name = text.substr(i + 1, close - i - 1);
    i = close;
    EvalValue *v = env->lookup(name);
    if (!v) {
      error(range, fmt::format("placeholder '{{{}}}' does not name a variable "
                               "in scope",
                               name));
      continue;
    }
    if (v->getKind() == EvalValue::Kind::Index) {
      if (keepIndices || !v->getIndexValue())
        out += v->getIndexSymbol() == "e" ? "{e}" : "{i}";
      else
        out += std::to_string(*v->getIndexValue());
      continue;
    }
    if (v->isTensor() || v->getKind() == EvalValue::Kind::Function) {
      error(range, fmt::format("placeholder '{{{}}}' names a {}, which has no "
                               "text form",
                               name, v->typeName()));
      continue;
    }
    out += v->str();
  }
  return out;
}

} // namespace archc
