//===- Ast.h - Abstract syntax tree of .arch files --------------*- C++ -*-===//
//
// This file declares the hand-written AST that the parser builds from the
// ANTLR parse tree. No ANTLR type appears here. Every node owns a SourceRange.
// Expressions and statements use a kind enum with LLVM-style classof.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_AST_H
#define ARCHC_FRONTEND_AST_H

#include "support/Casting.h"
#include "support/SourceMgr.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace archc::ast {

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

/// A written type: `int`, `float?`, `list<int>`, `dict`, `tensor`, ...
struct TypeRef {
  SourceRange range;
  std::string name;
  std::unique_ptr<TypeRef> elem; ///< element type of list<...>
  bool optional = false;
  std::string str() const;
};

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

class Expr {
public:
  enum class Kind {
    Int,
    Float,
    String,
    Bool,
    None,
    Name,
    List,
    Member,
    Call,
    Index,
    Scope,
    Unary,
    Binary,
    In,
    Cond,
    Fn
  };
  Expr(Kind k, SourceRange r) : kind(k), range(r) {}
  virtual ~Expr() = default;
  Kind getKind() const { return kind; }
  SourceRange getRange() const { return range; }

private:
  Kind kind;
  SourceRange range;
};
using ExprPtr = std::unique_ptr<Expr>;

#define ARCHC_EXPR_CLASSOF(K)                                                  \
  static bool classof(const Expr *e) { return e->getKind() == Kind::K; }

struct IntExpr : Expr {
  IntExpr(SourceRange r, int64_t v) : Expr(Kind::Int, r), value(v) {}
  int64_t value;
  ARCHC_EXPR_CLASSOF(Int)
};

struct FloatExpr : Expr {
  FloatExpr(SourceRange r, double v) : Expr(Kind::Float, r), value(v) {}
  double value;
  ARCHC_EXPR_CLASSOF(Float)
};

struct StringExpr : Expr {
  StringExpr(SourceRange r, std::string v)
      : Expr(Kind::String, r), value(std::move(v)) {}
  std::string value; ///< unescaped contents
  ARCHC_EXPR_CLASSOF(String)
};

struct BoolExpr : Expr {
  BoolExpr(SourceRange r, bool v) : Expr(Kind::Bool, r), value(v) {}
  bool value;
  ARCHC_EXPR_CLASSOF(Bool)
};

struct NoneExpr : Expr {
  explicit NoneExpr(SourceRange r) : Expr(Kind::None, r) {}
  ARCHC_EXPR_CLASSOF(None)
};

struct NameExpr : Expr {
  NameExpr(SourceRange r, std::string n)
      : Expr(Kind::Name, r), name(std::move(n)) {}
  std::string name;
  ARCHC_EXPR_CLASSOF(Name)
};

struct ListExpr : Expr {
  ListExpr(SourceRange r, std::vector<ExprPtr> e)
      : Expr(Kind::List, r), elems(std::move(e)) {}
  std::vector<ExprPtr> elems;
  ARCHC_EXPR_CLASSOF(List)
};

struct MemberExpr : Expr {
  MemberExpr(SourceRange r, ExprPtr b, std::string m, SourceRange mr)
      : Expr(Kind::Member, r), base(std::move(b)), member(std::move(m)),
        memberRange(mr) {}
  ExprPtr base;
  std::string member;
  SourceRange memberRange;
  ARCHC_EXPR_CLASSOF(Member)
};

/// One call argument, positional (name empty) or named (`eps: 1e-6`).
struct Arg {
  std::string name;
  SourceRange nameRange;
  ExprPtr value;
};

struct CallExpr : Expr {
  CallExpr(SourceRange r, ExprPtr c, std::vector<Arg> a)
      : Expr(Kind::Call, r), callee(std::move(c)), args(std::move(a)) {}
  ExprPtr callee;
  std::vector<Arg> args;
  ARCHC_EXPR_CLASSOF(Call)
};

struct IndexExpr : Expr {
  IndexExpr(SourceRange r, ExprPtr b, ExprPtr i)
      : Expr(Kind::Index, r), base(std::move(b)), index(std::move(i)) {}
  ExprPtr base, index;
  ARCHC_EXPR_CLASSOF(Index)
};

/// `expr @ "prefix"`: evaluates expr with `prefix` appended to the weight
/// name scope.
struct ScopeExpr : Expr {
  ScopeExpr(SourceRange r, ExprPtr e, std::string s, SourceRange sr)
      : Expr(Kind::Scope, r), inner(std::move(e)), scope(std::move(s)),
        scopeRange(sr) {}
  ExprPtr inner;
  std::string scope;
  SourceRange scopeRange;
  ARCHC_EXPR_CLASSOF(Scope)
};

enum class UnaryOp { Neg, Not };
enum class BinaryOp {
  Mul,
  Div,
  Mod,
  Add,
  Sub,
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  And,
  Or
};
/// The operator's canonical spelling (`&&` for And), from kOperators
/// (frontend/Operators.h).
const char *spelling(BinaryOp op);

struct UnaryExpr : Expr {
  UnaryExpr(SourceRange r, UnaryOp o, ExprPtr e)
      : Expr(Kind::Unary, r), op(o), operand(std::move(e)) {}
  UnaryOp op;
  ExprPtr operand;
  ARCHC_EXPR_CLASSOF(Unary)
};

struct BinaryExpr : Expr {
  BinaryExpr(SourceRange r, BinaryOp o, ExprPtr l, ExprPtr rr, SourceRange opr)
      : Expr(Kind::Binary, r), op(o), lhs(std::move(l)), rhs(std::move(rr)),
        opRange(opr) {}
  BinaryOp op;
  ExprPtr lhs, rhs;
  SourceRange opRange;
  ARCHC_EXPR_CLASSOF(Binary)
};

/// `a in b` / `a not in b`: membership in a list or dict (keys).
struct InExpr : Expr {
  InExpr(SourceRange r, ExprPtr l, ExprPtr rr, bool neg)
      : Expr(Kind::In, r), lhs(std::move(l)), rhs(std::move(rr)), negated(neg) {
  }
  ExprPtr lhs, rhs;
  bool negated;
  ARCHC_EXPR_CLASSOF(In)
};

struct CondExpr : Expr {
  CondExpr(SourceRange r, ExprPtr c, ExprPtr t, ExprPtr o)
      : Expr(Kind::Cond, r), cond(std::move(c)), then(std::move(t)),
        otherwise(std::move(o)) {}
  ExprPtr cond, then, otherwise;
  ARCHC_EXPR_CLASSOF(Cond)
};

struct Param;
struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

/// A parameter of a `def` or `fn`.
struct Param {
  SourceRange range;
  std::string name;
  std::unique_ptr<TypeRef> type; ///< optional annotation
  ExprPtr defaultValue;          ///< optional
};

/// `fn(params) { body }`: an anonymous function (expert bodies).
struct FnExpr : Expr {
  FnExpr(SourceRange r, std::vector<Param> p, std::vector<StmtPtr> b)
      : Expr(Kind::Fn, r), params(std::move(p)), body(std::move(b)) {}
  std::vector<Param> params;
  std::vector<StmtPtr> body;
  ARCHC_EXPR_CLASSOF(Fn)
};

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

struct Stmt {
  enum class Kind { Assign, AugAssign, For, If, Return, Error, Check };
  Stmt(Kind k, SourceRange r) : kind(k), range(r) {}
  virtual ~Stmt() = default;
  Kind getKind() const { return kind; }
  SourceRange getRange() const { return range; }

private:
  Kind kind;
  SourceRange range;
};

#define ARCHC_STMT_CLASSOF(K)                                                  \
  static bool classof(const Stmt *s) { return s->getKind() == Kind::K; }

/// A name being bound, with its own range.
struct Target {
  std::string name;
  SourceRange range;
};

struct AssignStmt : Stmt {
  AssignStmt(SourceRange r, std::vector<Target> t, ExprPtr v)
      : Stmt(Kind::Assign, r), targets(std::move(t)), value(std::move(v)) {}
  std::vector<Target> targets;
  ExprPtr value;
  ARCHC_STMT_CLASSOF(Assign)
};

struct AugAssignStmt : Stmt {
  AugAssignStmt(SourceRange r, Target t, BinaryOp o, ExprPtr v)
      : Stmt(Kind::AugAssign, r), target(std::move(t)), op(o),
        value(std::move(v)) {}
  Target target;
  BinaryOp op;
  ExprPtr value;
  ARCHC_STMT_CLASSOF(AugAssign)
};

/// `for i in lo .. hi @ "scope" { body }`.
struct ForStmt : Stmt {
  ForStmt(SourceRange r) : Stmt(Kind::For, r) {}
  Target var;
  ExprPtr lo, hi;
  std::optional<std::string> scope;
  SourceRange scopeRange;
  std::vector<StmtPtr> body;
  ARCHC_STMT_CLASSOF(For)
};

struct IfStmt : Stmt {
  IfStmt(SourceRange r) : Stmt(Kind::If, r) {}
  ExprPtr cond;
  std::vector<StmtPtr> then;
  std::vector<StmtPtr> otherwise; ///< `else if` is a nested IfStmt
  bool hasElse = false;
  ARCHC_STMT_CLASSOF(If)
};

struct ReturnStmt : Stmt {
  ReturnStmt(SourceRange r, std::vector<ExprPtr> v)
      : Stmt(Kind::Return, r), values(std::move(v)) {}
  std::vector<ExprPtr> values;
  ARCHC_STMT_CLASSOF(Return)
};

/// `error "message {name}"`: a compile-time error at this statement.
struct ErrorStmt : Stmt {
  ErrorStmt(SourceRange r, std::string m)
      : Stmt(Kind::Error, r), message(std::move(m)) {}
  std::string message;
  ARCHC_STMT_CLASSOF(Error)
};

/// `check cond, "message"`: a compile-time assertion.
struct CheckStmt : Stmt {
  CheckStmt(SourceRange r, ExprPtr c, std::optional<std::string> m)
      : Stmt(Kind::Check, r), cond(std::move(c)), message(std::move(m)) {}
  ExprPtr cond;
  std::optional<std::string> message;
  ARCHC_STMT_CLASSOF(Check)
};

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

/// One entry of a `config { }` block.
struct ConfigEntry {
  /// Field: read from config.json; Let: computed; Check: an assertion;
  /// Inert: config.json keys the family knows not to affect the model
  /// (`inert a, "b.c"`); Keep: base fields whose defaults this arch
  /// accepts as its own (`keep a, b`).
  enum class Kind { Field, Let, Check, Inert, Keep };
  Kind kind;
  SourceRange range;
  std::string name; ///< Field/Let
  SourceRange nameRange;
  std::unique_ptr<TypeRef> type; ///< Field (required) / Let (optional)
  ExprPtr value;                 ///< default (Field), value (Let), cond (Check)
  std::vector<std::string> aliases;
  std::optional<std::string> message; ///< Check
  std::vector<std::string> names;     ///< Inert (key paths) / Keep (fields)

  /// Whether the entry declares a name (a field or a let).
  bool declaresName() const { return kind == Kind::Field || kind == Kind::Let; }
};

struct DefDecl {
  SourceRange range;
  std::string name;
  SourceRange nameRange;
  std::vector<Param> params;
  std::vector<StmtPtr> body;
  uint32_t fileId = 0;
};

/// A graph input of the model: `input_ids: i64[batch, seq]`.
struct ModelInput {
  SourceRange range;
  std::string name;
  std::string dtype;
  SourceRange dtypeRange;
  std::vector<ExprPtr> dims;
};

struct ModelDecl {
  SourceRange range;
  /// Empty for the arch's main graph; the graph's name in a several-graph
  /// package (`model vision_encoder(...)`).
  std::string name;
  SourceRange nameRange;
  std::vector<ModelInput> inputs;
  std::vector<Target> outputs;
  std::vector<StmtPtr> body;
};

/// `use ARCH as ALIAS`: another arch's config (bound to the same
/// config.json) and defs, reachable through ALIAS (`text.decoder(...)`).
struct UseDecl {
  SourceRange range;
  std::string arch;
  SourceRange archRange;
  std::string alias; ///< the arch's name when `as` is absent
  SourceRange aliasRange;
};

struct ArchDecl {
  SourceRange range;
  std::string name;
  SourceRange nameRange;
  /// `extends BASE`: the arch this one refines (empty when none).
  std::string base;
  SourceRange baseRange;
  std::vector<std::string> matches; ///< HF `architectures` class names
  /// HF `model_type`s the arch claims (`model_type "llama"`); empty: any.
  std::vector<std::string> modelTypes;
  SourceRange modelTypesRange;
  // The members as written in this arch.
  std::vector<ConfigEntry> config;
  std::vector<UseDecl> uses;
  std::vector<std::unique_ptr<DefDecl>> defs;
  std::unique_ptr<ModelDecl> model;
  /// The named graphs of a several-graph package, in declaration order.
  std::vector<std::unique_ptr<ModelDecl>> graphs;

  // The effective members, set when the program resolves `extends`
  // (Program::load): the base's config entries with the fields and lets
  // this arch redeclares replaced in place, then this arch's new entries
  // (checks of both); the base's defs with this arch's overriding those of
  // the same name; the base's uses and named graphs likewise (by alias, by
  // graph name); this arch's model, else the base's. Without a base they
  // view the arch's own members. Later stages read only these.
  std::vector<const ConfigEntry *> allConfig;
  /// Inherited fields whose default this arch neither restates nor keeps:
  /// field name -> the base arch whose default is not inherited. Such a
  /// field must be in config.json.
  std::map<std::string, std::string> defaultsNotInherited;
  /// Every config.json key path the arch and its bases declare inert.
  std::vector<std::string> allInert;
  std::vector<const UseDecl *> allUses;
  std::vector<const DefDecl *> allDefs;
  const ModelDecl *effectiveModel = nullptr;
  std::vector<const ModelDecl *> allGraphs;
};

struct ImportDecl {
  SourceRange range;
  std::string path;
};

/// One parsed file.
struct File {
  uint32_t fileId = 0;
  std::vector<ImportDecl> imports;
  std::vector<std::unique_ptr<DefDecl>> defs;
  std::vector<std::unique_ptr<ArchDecl>> archs;
};

} // namespace archc::ast

#endif // ARCHC_FRONTEND_AST_H
