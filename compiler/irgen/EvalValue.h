//===- EvalValue.h - Compile-time values of the .arch language --*- C++ -*-===//
//
// This file declares EvalValue, the value an .arch expression evaluates to at
// compile time: a scalar (bool/int/float/string/none), a list, a dict (from
// config.json), a symbolic dim (`batch`, `seq`), a tensor (an IR value), a
// function (def or fn literal), a tuple (multiple results), or an index
// variable (layer `i` or expert `e`, whose value may stay symbolic).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IRGEN_EVALVALUE_H
#define ARCHC_IRGEN_EVALVALUE_H

#include "config/ConfigUse.h"
#include "frontend/Ast.h"
#include "ir/IR.h"

#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace archc {

class Env;

/// What the code of one arch sees besides its locals: the arch's defs and
/// its bound config. An arch used by another (`use llama as text`) keeps its
/// own, so its defs run as in their own arch.
struct ArchScope {
  std::map<std::string, const ast::DefDecl *> defs;
  std::shared_ptr<Env> config;
};

/// A callable: a `def` or an `fn` literal with its captured environment.
struct Callable {
  std::string name;
  const std::vector<ast::Param> *params = nullptr;
  const std::vector<ast::StmtPtr> *body = nullptr;
  SourceRange range;
  std::shared_ptr<Env> closure; ///< environment the body sees
  /// The arch whose defs the body calls by name (and whose config an arch
  /// def without closure sees); null: the caller's.
  std::shared_ptr<const ArchScope> arch;
};

class EvalValue {
public:
  enum class Kind {
    Poison, ///< result of an expression that already reported an error
    None,
    Bool,
    Int,
    Float,
    String,
    List,
    Dict,
    Dim,
    Tensor,
    Function,
    Tuple,
    Index
  };

  EvalValue() : kind(Kind::None) {}
  static EvalValue poison() { return EvalValue(Kind::Poison); }
  static EvalValue none() { return EvalValue(Kind::None); }
  static EvalValue boolean(bool b);
  static EvalValue integer(int64_t i);
  static EvalValue floating(double f);
  static EvalValue string(std::string s);
  static EvalValue list(std::vector<EvalValue> elems);
  static EvalValue tuple(std::vector<EvalValue> elems);
  /// A dict; `origin` when it is (a copy of) a config.json object, whose
  /// keys are then accounted for as the code reads them (config/ConfigUse.h).
  static EvalValue dict(std::map<std::string, EvalValue> entries,
                        std::shared_ptr<const ConfigOrigin> origin = nullptr);
  static EvalValue dim(ir::SymExpr d);
  static EvalValue tensor(ir::Value *v);
  static EvalValue function(std::shared_ptr<Callable> fn);
  /// A layer (`symbol` "i", concrete value) or expert (`symbol` "e", no
  /// value) index.
  static EvalValue index(std::string symbol, std::optional<int64_t> value);

  Kind getKind() const { return kind; }
  bool isPoison() const { return kind == Kind::Poison; }
  bool isNone() const { return kind == Kind::None; }
  bool isTensor() const { return kind == Kind::Tensor; }
  /// Int, or an index with a concrete value.
  bool isInt() const;
  bool isNumber() const { return isInt() || kind == Kind::Float; }

  bool getBool() const { return std::get<bool>(data); }
  int64_t getInt() const;
  double getNumber() const;
  const std::string &getString() const;
  const std::vector<EvalValue> &getList() const {
    return *std::get<ListPtr>(data);
  }
  const std::map<std::string, EvalValue> &getDict() const {
    return std::get<DictPtr>(data)->entries;
  }
  /// The config.json object a dict came from, or null.
  const std::shared_ptr<const ConfigOrigin> &getDictOrigin() const {
    return std::get<DictPtr>(data)->origin;
  }
  /// The entry `key` of a dict (null when absent), accounting for the key in
  /// the dict's config origin: the code reads it.
  const EvalValue *readDictKey(const std::string &key) const;
  /// Accounts for every key of a dict from config.json (it is handed whole
  /// to an op, or compared as a whole).
  void readWholeDict() const;
  const ir::SymExpr &getDim() const { return *std::get<DimPtr>(data); }
  ir::Value *getTensor() const { return std::get<ir::Value *>(data); }
  const std::shared_ptr<Callable> &getFunction() const {
    return std::get<std::shared_ptr<Callable>>(data);
  }
  /// Index variables: placeholder symbol and optional concrete value.
  const std::string &getIndexSymbol() const {
    return std::get<IndexData>(data).symbol;
  }
  std::optional<int64_t> getIndexValue() const {
    return std::get<IndexData>(data).value;
  }

  /// The language's name for this value's type: `int`, `tensor`, `list`, ...
  std::string typeName() const;
  /// Human-readable rendering (for messages and string interpolation).
  std::string str() const;
  /// Structural equality for compile-time values.
  bool equals(const EvalValue &o) const;

private:
  using StrPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<const std::vector<EvalValue>>;
  struct DictData {
    std::map<std::string, EvalValue> entries;
    std::shared_ptr<const ConfigOrigin> origin;
  };
  using DictPtr = std::shared_ptr<const DictData>;
  using DimPtr = std::shared_ptr<const ir::SymExpr>;
  struct IndexData {
    std::string symbol;
    std::optional<int64_t> value;
  };
  explicit EvalValue(Kind k) : kind(k) {}
  Kind kind;
  // One alternative per kind group; copies copy only the active one.
  std::variant<std::monostate, bool, int64_t, double, StrPtr, ListPtr, DictPtr,
               DimPtr, ir::Value *, std::shared_ptr<Callable>, IndexData>
      data;
};

/// A lexical environment: name -> value, with a parent chain.
class Env : public std::enable_shared_from_this<Env> {
public:
  explicit Env(std::shared_ptr<Env> parent = nullptr)
      : parent(std::move(parent)) {}
  /// Finds a binding in this env or its parents.
  EvalValue *lookup(const std::string &name);
  /// Binds in this env (shadowing parents).
  void define(const std::string &name, EvalValue v);
  /// Rebinds where the name is found, else defines here.
  void assign(const std::string &name, EvalValue v);
  bool hasLocal(const std::string &name) const;
  /// Bindings of this env (not its parents), in definition order.
  const std::vector<std::pair<std::string, EvalValue>> &locals() const {
    return vars;
  }
  std::shared_ptr<Env> getParent() const { return parent; }

private:
  std::shared_ptr<Env> parent;
  // Scopes hold a handful of names: a vector beats a map.
  std::vector<std::pair<std::string, EvalValue>> vars;
};

} // namespace archc

#endif // ARCHC_IRGEN_EVALVALUE_H
