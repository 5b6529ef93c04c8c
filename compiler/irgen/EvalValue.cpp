//===- EvalValue.cpp - Compile-time values of the .arch language ----------===//
//
// This file implements EvalValue constructors, printing and equality, and
// the Env chain.
//
//===----------------------------------------------------------------------===//
#include "irgen/EvalValue.h"

#include <fmt/format.h>

namespace archc {

EvalValue EvalValue::boolean(bool b) {
  EvalValue v(Kind::Bool);
  v.b = b;
  return v;
}
EvalValue EvalValue::integer(int64_t i) {
  EvalValue v(Kind::Int);
  v.i = i;
  return v;
}
EvalValue EvalValue::floating(double f) {
  EvalValue v(Kind::Float);
  v.f = f;
  return v;
}
EvalValue EvalValue::string(std::string s) {
  EvalValue v(Kind::String);
  v.s = std::move(s);
  return v;
}
EvalValue EvalValue::list(std::vector<EvalValue> elems) {
  EvalValue v(Kind::List);
  v.elems = std::make_shared<std::vector<EvalValue>>(std::move(elems));
  return v;
}
EvalValue EvalValue::tuple(std::vector<EvalValue> elems) {
  EvalValue v(Kind::Tuple);
  v.elems = std::make_shared<std::vector<EvalValue>>(std::move(elems));
  return v;
}
EvalValue EvalValue::dict(std::map<std::string, EvalValue> entries) {
  EvalValue v(Kind::Dict);
  v.entries =
      std::make_shared<std::map<std::string, EvalValue>>(std::move(entries));
  return v;
}
EvalValue EvalValue::dim(ir::SymExpr d) {
  if (auto c = d.getConstant())
    return integer(*c);
  EvalValue v(Kind::Dim);
  v.d = std::move(d);
  return v;
}
EvalValue EvalValue::tensor(ir::Value *t) {
  EvalValue v(Kind::Tensor);
  v.t = t;
  return v;
}
EvalValue EvalValue::function(std::shared_ptr<Callable> fn) {
  EvalValue v(Kind::Function);
  v.fn = std::move(fn);
  return v;
}
EvalValue EvalValue::index(std::string symbol, std::optional<int64_t> value) {
  EvalValue v(Kind::Index);
  v.s = std::move(symbol);
  v.idx = value;
  return v;
}

bool EvalValue::isInt() const {
  return kind == Kind::Int || (kind == Kind::Index && idx.has_value());
}

int64_t EvalValue::getInt() const {
  if (kind == Kind::Index)
    return idx.value_or(0);
  return i;
}

double EvalValue::getNumber() const {
  if (kind == Kind::Float)
    return f;
  return static_cast<double>(getInt());
}

std::string EvalValue::typeName() const {
  switch (kind) {
  case Kind::Poison:
    return "<error>";
  case Kind::None:
    return "none";
  case Kind::Bool:
    return "bool";
  case Kind::Int:
    return "int";
  case Kind::Float:
    return "float";
  case Kind::String:
    return "string";
  case Kind::List:
    return "list";
  case Kind::Dict:
    return "dict";
  case Kind::Dim:
    return "dim";
  case Kind::Tensor:
    return "tensor";
  case Kind::Function:
    return "function";
  case Kind::Tuple:
    return "tuple";
  case Kind::Index:
    return idx ? "int" : "index";
  }
  return "?";
}

std::string EvalValue::str() const {
  switch (kind) {
  case Kind::Poison:
    return "<error>";
  case Kind::None:
    return "none";
  case Kind::Bool:
    return b ? "true" : "false";
  case Kind::Int:
    return std::to_string(i);
  case Kind::Float: {
    std::string s = fmt::format("{}", f);
    if (s.find_first_of(".eni") == std::string::npos)
      s += ".0";
    return s;
  }
  case Kind::String:
    return s;
  case Kind::List:
  case Kind::Tuple: {
    std::string out = kind == Kind::List ? "[" : "(";
    for (size_t k = 0; k < elems->size(); ++k) {
      const EvalValue &e = (*elems)[k];
      out += (k ? ", " : "") +
             (e.kind == Kind::String ? "\"" + e.s + "\"" : e.str());
    }
    return out + (kind == Kind::List ? "]" : ")");
  }
  case Kind::Dict: {
    std::string out = "{";
    bool first = true;
    for (auto &[k, v] : *entries) {
      out += (first ? "" : ", ") + k + ": " +
             (v.kind == Kind::String ? "\"" + v.s + "\"" : v.str());
      first = false;
    }
    return out + "}";
  }
  case Kind::Dim:
    return d.str();
  case Kind::Tensor:
    return "<tensor>";
  case Kind::Function:
    return "<function " + (fn ? fn->name : std::string()) + ">";
  case Kind::Index:
    return idx ? std::to_string(*idx) : "{" + s + "}";
  }
  return "?";
}

bool EvalValue::equals(const EvalValue &o) const {
  if (isNumber() && o.isNumber()) {
    if (isInt() && o.isInt())
      return getInt() == o.getInt();
    return getNumber() == o.getNumber();
  }
  if (kind != o.kind)
    return false;
  switch (kind) {
  case Kind::None:
    return true;
  case Kind::Bool:
    return b == o.b;
  case Kind::String:
    return s == o.s;
  case Kind::List:
  case Kind::Tuple:
    if (elems->size() != o.elems->size())
      return false;
    for (size_t k = 0; k < elems->size(); ++k)
      if (!(*elems)[k].equals((*o.elems)[k]))
        return false;
    return true;
  case Kind::Dict:
    if (entries->size() != o.entries->size())
      return false;
    for (auto &[k, v] : *entries) {
      auto it = o.entries->find(k);
      if (it == o.entries->end() || !v.equals(it->second))
        return false;
    }
    return true;
  case Kind::Dim:
    return d == o.d;
  case Kind::Tensor:
    return t == o.t;
  case Kind::Function:
    return fn == o.fn;
  default:
    return false;
  }
}

EvalValue *Env::lookup(const std::string &name) {
  for (Env *e = this; e; e = e->parent.get()) {
    auto it = e->vars.find(name);
    if (it != e->vars.end())
      return &it->second;
  }
  return nullptr;
}

void Env::assign(const std::string &name, EvalValue v) {
  for (Env *e = this; e; e = e->parent.get()) {
    auto it = e->vars.find(name);
    if (it != e->vars.end()) {
      it->second = std::move(v);
      return;
    }
  }
  vars[name] = std::move(v);
}

} // namespace archc
