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
  v.data = b;
  return v;
}
EvalValue EvalValue::integer(int64_t i) {
  EvalValue v(Kind::Int);
  v.data = i;
  return v;
}
EvalValue EvalValue::floating(double f) {
  EvalValue v(Kind::Float);
  v.data = f;
  return v;
}
EvalValue EvalValue::string(std::string s) {
  EvalValue v(Kind::String);
  v.data = std::make_shared<const std::string>(std::move(s));
  return v;
}
EvalValue EvalValue::list(std::vector<EvalValue> elems) {
  EvalValue v(Kind::List);
  v.data = std::make_shared<const std::vector<EvalValue>>(std::move(elems));
  return v;
}
EvalValue EvalValue::tuple(std::vector<EvalValue> elems) {
  EvalValue v(Kind::Tuple);
  v.data = std::make_shared<const std::vector<EvalValue>>(std::move(elems));
  return v;
}
EvalValue EvalValue::dict(std::map<std::string, EvalValue> entries,
                          std::shared_ptr<const ConfigOrigin> origin) {
  EvalValue v(Kind::Dict);
  v.data = std::make_shared<const DictData>(
      DictData{std::move(entries), std::move(origin)});
  return v;
}

const EvalValue *EvalValue::readDictKey(const std::string &key) const {
  const DictData &d = *std::get<DictPtr>(data);
  auto it = d.entries.find(key);
  if (d.origin)
    d.origin->readKey(key, it != d.entries.end() &&
                               it->second.kind == Kind::Dict &&
                               it->second.getDictOrigin());
  return it == d.entries.end() ? nullptr : &it->second;
}

void EvalValue::readWholeDict() const {
  if (const auto &origin = std::get<DictPtr>(data)->origin)
    origin->readAll();
}
EvalValue EvalValue::dim(ir::SymExpr d) {
  if (auto c = d.getConstant())
    return integer(*c);
  EvalValue v(Kind::Dim);
  v.data = std::make_shared<const ir::SymExpr>(std::move(d));
  return v;
}
EvalValue EvalValue::tensor(ir::Value *t) {
  EvalValue v(Kind::Tensor);
  v.data = t;
  return v;
}
EvalValue EvalValue::function(std::shared_ptr<Callable> fn) {
  EvalValue v(Kind::Function);
  v.data = std::move(fn);
  return v;
}
EvalValue EvalValue::index(std::string symbol, std::optional<int64_t> value) {
  EvalValue v(Kind::Index);
  v.data = IndexData{std::move(symbol), value};
  return v;
}

bool EvalValue::isInt() const {
  return kind == Kind::Int ||
         (kind == Kind::Index && std::get<IndexData>(data).value.has_value());
}

int64_t EvalValue::getInt() const {
  if (kind == Kind::Index)
    return std::get<IndexData>(data).value.value_or(0);
  return std::get<int64_t>(data);
}

double EvalValue::getNumber() const {
  if (kind == Kind::Float)
    return std::get<double>(data);
  return static_cast<double>(getInt());
}

const std::string &EvalValue::getString() const {
  return *std::get<StrPtr>(data);
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
    return getIndexValue() ? "int" : "index";
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
    return getBool() ? "true" : "false";
  case Kind::Int:
    return std::to_string(getInt());
  case Kind::Float: {
    std::string s = fmt::format("{}", getNumber());
    if (s.find_first_of(".eni") == std::string::npos)
      s += ".0";
    return s;
  }
  case Kind::String:
    return getString();
  case Kind::List:
  case Kind::Tuple: {
    std::string out = kind == Kind::List ? "[" : "(";
    const auto &elems = getList();
    for (size_t k = 0; k < elems.size(); ++k) {
      const EvalValue &e = elems[k];
      out += (k ? ", " : "") +
             (e.kind == Kind::String ? "\"" + e.getString() + "\"" : e.str());
    }
    return out + (kind == Kind::List ? "]" : ")");
  }
  case Kind::Dict: {
    std::string out = "{";
    bool first = true;
    for (auto &[k, v] : getDict()) {
      out += (first ? "" : ", ") + k + ": " +
             (v.kind == Kind::String ? "\"" + v.getString() + "\"" : v.str());
      first = false;
    }
    return out + "}";
  }
  case Kind::Dim:
    return getDim().str();
  case Kind::Tensor:
    return "<tensor>";
  case Kind::Function:
    return "<function " +
           (getFunction() ? getFunction()->name : std::string()) + ">";
  case Kind::Index:
    return getIndexValue() ? std::to_string(*getIndexValue())
                           : "{" + getIndexSymbol() + "}";
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
    return getBool() == o.getBool();
  case Kind::String:
    return getString() == o.getString();
  case Kind::List:
  case Kind::Tuple: {
    const auto &a = getList(), &b = o.getList();
    if (a.size() != b.size())
      return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (!a[k].equals(b[k]))
        return false;
    return true;
  }
  case Kind::Dict: {
    readWholeDict();
    o.readWholeDict();
    const auto &a = getDict(), &b = o.getDict();
    if (a.size() != b.size())
      return false;
    for (auto &[k, v] : a) {
      auto it = b.find(k);
      if (it == b.end() || !v.equals(it->second))
        return false;
    }
    return true;
  }
  case Kind::Dim:
    return getDim() == o.getDim();
  case Kind::Tensor:
    return getTensor() == o.getTensor();
  case Kind::Function:
    return getFunction() == o.getFunction();
  default:
    return false;
  }
}

EvalValue *Env::lookup(const std::string &name) {
  for (Env *e = this; e; e = e->parent.get())
    for (auto &[k, v] : e->vars)
      if (k == name)
        return &v;
  return nullptr;
}

void Env::define(const std::string &name, EvalValue v) {
  for (auto &[k, old] : vars)
    if (k == name) {
      old = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

bool Env::hasLocal(const std::string &name) const {
  for (auto &[k, v] : vars)
    if (k == name)
      return true;
  return false;
}

void Env::assign(const std::string &name, EvalValue v) {
  if (EvalValue *slot = lookup(name)) {
    *slot = std::move(v);
    return;
  }
  vars.emplace_back(name, std::move(v));
}

} // namespace archc
