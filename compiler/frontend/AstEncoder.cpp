//===- AstEncoder.cpp - An ast::File as bytes -----------------------------===//
//
// See AstCodec.cpp for the encoding.
//
//===----------------------------------------------------------------------===//
#include "frontend/AstCodec.h"

#include <bit>
#include <limits>

namespace archc::ast {

namespace {

//===----------------------------------------------------------------------===//
// Encoder
//===----------------------------------------------------------------------===//

class Encoder {
public:
  Encoder(std::string &out, uint32_t fileId) : out(out), fileId(fileId) {}
  bool ok = true;

  void file(const File &f) {
    count(f.imports.size());
    for (const ImportDecl &i : f.imports) {
      range(i.range);
      str(i.path);
    }
    count(f.defs.size());
    for (const auto &d : f.defs)
      def(*d);
    count(f.archs.size());
    for (const auto &a : f.archs)
      arch(*a);
  }

private:
  std::string &out;
  uint32_t fileId;
  unsigned depth = 0;

  /// Counts one level of nesting for the duration of a node.
  struct Nested {
    Encoder &e;
    explicit Nested(Encoder &e) : e(e) {
      if (++e.depth > kMaxCodecDepth)
        e.ok = false;
    }
    ~Nested() { --e.depth; }
  };

  void varint(uint64_t v) {
    while (v >= 0x80) {
      out += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out += static_cast<char>(v);
  }
  void count(size_t n) { varint(n); }
  void flag(bool b) { out += static_cast<char>(b ? 1 : 0); }
  void sint(int64_t v) {
    uint64_t u = static_cast<uint64_t>(v);
    varint((u << 1) ^ (v < 0 ? ~uint64_t(0) : 0));
  }
  void real(double d) {
    uint64_t bits = std::bit_cast<uint64_t>(d);
    for (int i = 0; i < 8; ++i)
      out += static_cast<char>((bits >> (8 * i)) & 0xff);
  }
  void str(const std::string &s) {
    count(s.size());
    out += s;
  }
  void optStr(const std::optional<std::string> &s) {
    flag(s.has_value());
    if (s)
      str(*s);
  }
  void loc(SourceLoc l) {
    if (l.fileId != 0 && l.fileId != fileId)
      ok = false;
    varint((uint64_t(l.line) << 1) | (l.fileId != 0 ? 1 : 0));
    varint(l.col);
  }
  void range(SourceRange r) {
    loc(r.begin);
    loc(r.end);
  }
  void target(const Target &t) {
    str(t.name);
    range(t.range);
  }

  void type(const TypeRef *t) {
    Nested n(*this);
    flag(t != nullptr);
    if (!t)
      return;
    range(t->range);
    str(t->name);
    flag(t->optional);
    type(t->elem.get());
  }

  void params(const std::vector<Param> &ps) {
    count(ps.size());
    for (const Param &p : ps) {
      range(p.range);
      str(p.name);
      type(p.type.get());
      expr(p.defaultValue.get());
    }
  }

  void exprs(const std::vector<ExprPtr> &es) {
    count(es.size());
    for (const ExprPtr &e : es)
      expr(e.get());
  }

  void expr(const Expr *e) {
    Nested n(*this);
    if (!e) {
      varint(0);
      return;
    }
    varint(static_cast<uint64_t>(e->getKind()) + 1);
    range(e->getRange());
    switch (e->getKind()) {
    case Expr::Kind::Int:
      sint(cast<IntExpr>(e)->value);
      break;
    case Expr::Kind::Float:
      real(cast<FloatExpr>(e)->value);
      break;
    case Expr::Kind::String:
      str(cast<StringExpr>(e)->value);
      break;
    case Expr::Kind::Bool:
      flag(cast<BoolExpr>(e)->value);
      break;
    case Expr::Kind::None:
      break;
    case Expr::Kind::Name:
      str(cast<NameExpr>(e)->name);
      break;
    case Expr::Kind::List:
      exprs(cast<ListExpr>(e)->elems);
      break;
    case Expr::Kind::Member: {
      auto *m = cast<MemberExpr>(e);
      expr(m->base.get());
      str(m->member);
      range(m->memberRange);
      break;
    }
    case Expr::Kind::Call: {
      auto *c = cast<CallExpr>(e);
      expr(c->callee.get());
      count(c->args.size());
      for (const Arg &a : c->args) {
        str(a.name);
        range(a.nameRange);
        expr(a.value.get());
      }
      break;
    }
    case Expr::Kind::Index: {
      auto *i = cast<IndexExpr>(e);
      expr(i->base.get());
      expr(i->index.get());
      break;
    }
    case Expr::Kind::Scope: {
      auto *s = cast<ScopeExpr>(e);
      expr(s->inner.get());
      str(s->scope);
      range(s->scopeRange);
      break;
    }
    case Expr::Kind::Unary: {
      auto *u = cast<UnaryExpr>(e);
      varint(static_cast<uint64_t>(u->op));
      expr(u->operand.get());
      break;
    }
    case Expr::Kind::Binary: {
      auto *b = cast<BinaryExpr>(e);
      varint(static_cast<uint64_t>(b->op));
      expr(b->lhs.get());
      expr(b->rhs.get());
      range(b->opRange);
      break;
    }
    case Expr::Kind::In: {
      auto *i = cast<InExpr>(e);
      expr(i->lhs.get());
      expr(i->rhs.get());
      flag(i->negated);
      break;
    }
    case Expr::Kind::Cond: {
      auto *c = cast<CondExpr>(e);
      expr(c->cond.get());
      expr(c->then.get());
      expr(c->otherwise.get());
      break;
    }
    case Expr::Kind::Fn: {
      auto *f = cast<FnExpr>(e);
      params(f->params);
      stmts(f->body);
      break;
    }
    }
  }

  void stmts(const std::vector<StmtPtr> &ss) {
    count(ss.size());
    for (const StmtPtr &s : ss)
      stmt(s.get());
  }

  void stmt(const Stmt *s) {
    Nested n(*this);
    if (!s) {
      varint(0);
      return;
    }
    varint(static_cast<uint64_t>(s->getKind()) + 1);
    range(s->getRange());
    switch (s->getKind()) {
    case Stmt::Kind::Assign: {
      auto *a = cast<AssignStmt>(s);
      count(a->targets.size());
      for (const Target &t : a->targets)
        target(t);
      expr(a->value.get());
      break;
    }
    case Stmt::Kind::AugAssign: {
      auto *a = cast<AugAssignStmt>(s);
      target(a->target);
      varint(static_cast<uint64_t>(a->op));
      expr(a->value.get());
      break;
    }
    case Stmt::Kind::For: {
      auto *f = cast<ForStmt>(s);
      target(f->var);
      expr(f->lo.get());
      expr(f->hi.get());
      optStr(f->scope);
      range(f->scopeRange);
      stmts(f->body);
      break;
    }
    case Stmt::Kind::If: {
      auto *i = cast<IfStmt>(s);
      expr(i->cond.get());
      stmts(i->then);
      stmts(i->otherwise);
      flag(i->hasElse);
      break;
    }
    case Stmt::Kind::Return:
      exprs(cast<ReturnStmt>(s)->values);
      break;
    case Stmt::Kind::Error:
      str(cast<ErrorStmt>(s)->message);
      break;
    case Stmt::Kind::Check: {
      auto *c = cast<CheckStmt>(s);
      expr(c->cond.get());
      optStr(c->message);
      break;
    }
    }
  }

  void def(const DefDecl &d) {
    if (d.fileId != fileId)
      ok = false;
    range(d.range);
    str(d.name);
    range(d.nameRange);
    params(d.params);
    stmts(d.body);
  }

  void config(const ConfigEntry &c) {
    varint(static_cast<uint64_t>(c.kind));
    range(c.range);
    str(c.name);
    range(c.nameRange);
    type(c.type.get());
    expr(c.value.get());
    count(c.aliases.size());
    for (const std::string &a : c.aliases)
      str(a);
    optStr(c.message);
    count(c.names.size());
    for (const std::string &n : c.names)
      str(n);
  }

  void model(const ModelDecl *m) {
    flag(m != nullptr);
    if (!m)
      return;
    range(m->range);
    str(m->name);
    range(m->nameRange);
    count(m->inputs.size());
    for (const ModelInput &i : m->inputs) {
      range(i.range);
      str(i.name);
      str(i.dtype);
      range(i.dtypeRange);
      exprs(i.dims);
    }
    count(m->outputs.size());
    for (const Target &t : m->outputs)
      target(t);
    stmts(m->body);
  }

  void arch(const ArchDecl &a) {
    range(a.range);
    str(a.name);
    range(a.nameRange);
    str(a.base);
    range(a.baseRange);
    count(a.matches.size());
    for (const std::string &m : a.matches)
      str(m);
    count(a.modelTypes.size());
    for (const std::string &t : a.modelTypes)
      str(t);
    range(a.modelTypesRange);
    count(a.config.size());
    for (const ConfigEntry &c : a.config)
      config(c);
    count(a.uses.size());
    for (const UseDecl &u : a.uses) {
      range(u.range);
      str(u.arch);
      range(u.archRange);
      str(u.alias);
      range(u.aliasRange);
    }
    count(a.defs.size());
    for (const auto &d : a.defs)
      def(*d);
    model(a.model.get());
    count(a.graphs.size());
    for (const auto &g : a.graphs)
      model(g.get());
  }
};

} // namespace

bool encodeFile(const File &file, std::string &out) {
  std::string bytes;
  Encoder e(bytes, file.fileId);
  e.file(file);
  if (!e.ok)
    return false;
  out += bytes;
  return true;
}

} // namespace archc::ast
