//===- AstDump.h - Canonical text of an AST, for tests ----------*- C++ -*-===//
//
// This file prints every field of an ast::File (every node, string, number,
// flag and SourceRange with its file id) as indented text, so that two ASTs
// are equal exactly when their dumps are. It is written independently of
// the snapshot's codec (frontend/AstCodec.cpp), which the tests check
// against it.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_TESTS_ASTDUMP_H
#define ARCHC_TESTS_ASTDUMP_H

#include "frontend/Ast.h"

#include <bit>
#include <sstream>
#include <string>

// GCC 12 reports a false -Wrestrict for `"text" + std::string` once inlined
// (GCC bug 105329); the concatenations below are ordinary.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace archc::test {

class AstDumper {
public:
  std::string dump(const ast::File &f) {
    line("file " + std::to_string(f.fileId));
    Indent i(*this);
    for (const ast::ImportDecl &imp : f.imports)
      line("import " + range(imp.range) + " " + quote(imp.path));
    for (const auto &d : f.defs)
      def(*d);
    for (const auto &a : f.archs)
      arch(*a);
    return os.str();
  }

private:
  std::ostringstream os;
  unsigned depth = 0;
  struct Indent {
    AstDumper &d;
    explicit Indent(AstDumper &d) : d(d) { ++d.depth; }
    ~Indent() { --d.depth; }
  };

  void line(const std::string &s) {
    os << std::string(2 * depth, ' ') << s << '\n';
  }
  static std::string loc(SourceLoc l) {
    return std::to_string(l.fileId) + ":" + std::to_string(l.line) + ":" +
           std::to_string(l.col);
  }
  static std::string range(SourceRange r) {
    std::string s(1, '[');
    s += loc(r.begin);
    s += '-';
    s += loc(r.end);
    s += ']';
    return s;
  }
  static std::string quote(const std::string &s) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '\n')
        q += "\\n";
      else if (c == '"' || c == '\\')
        q += std::string("\\") + c;
      else
        q += c;
    }
    return q + "\"";
  }
  static std::string target(const ast::Target &t) {
    return quote(t.name) + range(t.range);
  }
  static std::string optional(const std::optional<std::string> &s) {
    return s ? quote(*s) : std::string("<none>");
  }

  void type(const char *what, const ast::TypeRef *t) {
    if (!t) {
      line(std::string(what) + " <none>");
      return;
    }
    line(std::string(what) + " type " + range(t->range) + " " + quote(t->name) +
         (t->optional ? " optional" : ""));
    Indent i(*this);
    type("elem", t->elem.get());
  }

  void params(const std::vector<ast::Param> &ps) {
    for (const ast::Param &p : ps) {
      line("param " + range(p.range) + " " + quote(p.name));
      Indent i(*this);
      type("type", p.type.get());
      expr("default", p.defaultValue.get());
    }
  }

  void expr(const char *what, const ast::Expr *e) {
    using K = ast::Expr::Kind;
    if (!e) {
      line(std::string(what) + " <none>");
      return;
    }
    std::string head = std::string(what) + " " + range(e->getRange()) + " ";
    switch (e->getKind()) {
    case K::Int:
      line(head + "int " + std::to_string(cast<ast::IntExpr>(e)->value));
      return;
    case K::Float:
      line(head + "float bits " +
           std::to_string(
               std::bit_cast<uint64_t>(cast<ast::FloatExpr>(e)->value)));
      return;
    case K::String:
      line(head + "string " + quote(cast<ast::StringExpr>(e)->value));
      return;
    case K::Bool:
      line(head + "bool " + (cast<ast::BoolExpr>(e)->value ? "1" : "0"));
      return;
    case K::None:
      line(head + "none");
      return;
    case K::Name:
      line(head + "name " + quote(cast<ast::NameExpr>(e)->name));
      return;
    case K::List: {
      line(head + "list");
      Indent i(*this);
      for (const auto &x : cast<ast::ListExpr>(e)->elems)
        expr("elem", x.get());
      return;
    }
    case K::Member: {
      auto *m = cast<ast::MemberExpr>(e);
      line(head + "member " + quote(m->member) + range(m->memberRange));
      Indent i(*this);
      expr("base", m->base.get());
      return;
    }
    case K::Call: {
      auto *c = cast<ast::CallExpr>(e);
      line(head + "call");
      Indent i(*this);
      expr("callee", c->callee.get());
      for (const ast::Arg &a : c->args) {
        line("arg " + quote(a.name) + range(a.nameRange));
        Indent j(*this);
        expr("value", a.value.get());
      }
      return;
    }
    case K::Index: {
      auto *x = cast<ast::IndexExpr>(e);
      line(head + "index");
      Indent i(*this);
      expr("base", x->base.get());
      expr("index", x->index.get());
      return;
    }
    case K::Scope: {
      auto *x = cast<ast::ScopeExpr>(e);
      line(head + "scope " + quote(x->scope) + range(x->scopeRange));
      Indent i(*this);
      expr("inner", x->inner.get());
      return;
    }
    case K::Unary: {
      auto *u = cast<ast::UnaryExpr>(e);
      line(head + "unary " + std::to_string(int(u->op)));
      Indent i(*this);
      expr("operand", u->operand.get());
      return;
    }
    case K::Binary: {
      auto *b = cast<ast::BinaryExpr>(e);
      line(head + "binary " + std::to_string(int(b->op)) + range(b->opRange));
      Indent i(*this);
      expr("lhs", b->lhs.get());
      expr("rhs", b->rhs.get());
      return;
    }
    case K::In: {
      auto *x = cast<ast::InExpr>(e);
      line(head + (x->negated ? "not-in" : "in"));
      Indent i(*this);
      expr("lhs", x->lhs.get());
      expr("rhs", x->rhs.get());
      return;
    }
    case K::Cond: {
      auto *c = cast<ast::CondExpr>(e);
      line(head + "cond");
      Indent i(*this);
      expr("cond", c->cond.get());
      expr("then", c->then.get());
      expr("else", c->otherwise.get());
      return;
    }
    case K::Fn: {
      auto *f = cast<ast::FnExpr>(e);
      line(head + "fn");
      Indent i(*this);
      params(f->params);
      stmts("body", f->body);
      return;
    }
    }
    line(head + "<unknown kind>");
  }

  void stmts(const char *what, const std::vector<ast::StmtPtr> &ss) {
    line(std::string(what) + " " + std::to_string(ss.size()));
    Indent i(*this);
    for (const auto &s : ss)
      stmt(s.get());
  }

  void stmt(const ast::Stmt *s) {
    using K = ast::Stmt::Kind;
    if (!s) {
      line("stmt <none>");
      return;
    }
    std::string head = "stmt " + range(s->getRange()) + " ";
    switch (s->getKind()) {
    case K::Assign: {
      auto *a = cast<ast::AssignStmt>(s);
      std::string t;
      for (const ast::Target &x : a->targets)
        t += " " + target(x);
      line(head + "assign" + t);
      Indent i(*this);
      expr("value", a->value.get());
      break;
    }
    case K::AugAssign: {
      auto *a = cast<ast::AugAssignStmt>(s);
      line(head + "aug-assign " + target(a->target) + " " +
           std::to_string(int(a->op)));
      Indent i(*this);
      expr("value", a->value.get());
      break;
    }
    case K::For: {
      auto *f = cast<ast::ForStmt>(s);
      line(head + "for " + target(f->var) + " scope " + optional(f->scope) +
           range(f->scopeRange));
      Indent i(*this);
      expr("lo", f->lo.get());
      expr("hi", f->hi.get());
      stmts("body", f->body);
      break;
    }
    case K::If: {
      auto *x = cast<ast::IfStmt>(s);
      line(head + "if" + (x->hasElse ? " has-else" : ""));
      Indent i(*this);
      expr("cond", x->cond.get());
      stmts("then", x->then);
      stmts("else", x->otherwise);
      break;
    }
    case K::Return: {
      line(head + "return");
      Indent i(*this);
      for (const auto &v : cast<ast::ReturnStmt>(s)->values)
        expr("value", v.get());
      break;
    }
    case K::Error:
      line(head + "error " + quote(cast<ast::ErrorStmt>(s)->message));
      break;
    case K::Check: {
      auto *c = cast<ast::CheckStmt>(s);
      line(head + "check " + optional(c->message));
      Indent i(*this);
      expr("cond", c->cond.get());
      break;
    }
    }
  }

  void def(const ast::DefDecl &d) {
    line("def " + range(d.range) + " " + quote(d.name) + range(d.nameRange) +
         " file " + std::to_string(d.fileId));
    Indent i(*this);
    params(d.params);
    stmts("body", d.body);
  }

  void arch(const ast::ArchDecl &a) {
    std::string m;
    for (const std::string &s : a.matches)
      m += " " + quote(s);
    std::string t;
    for (const std::string &s : a.modelTypes)
      t += " " + quote(s);
    line("arch " + range(a.range) + " " + quote(a.name) + range(a.nameRange) +
         " extends " + quote(a.base) + range(a.baseRange) + " model_type" + t +
         range(a.modelTypesRange) + " matches" + m);
    Indent i(*this);
    for (const ast::ConfigEntry &c : a.config) {
      std::string aliases;
      for (const std::string &s : c.aliases)
        aliases += " " + quote(s);
      std::string names;
      for (const std::string &s : c.names)
        names += " " + quote(s);
      line("config " + std::to_string(int(c.kind)) + " " + range(c.range) +
           " " + quote(c.name) + range(c.nameRange) + " aliases" + aliases +
           " message " + optional(c.message) + " names" + names);
      Indent j(*this);
      type("type", c.type.get());
      expr("value", c.value.get());
    }
    for (const ast::UseDecl &u : a.uses)
      line("use " + range(u.range) + " " + quote(u.arch) + range(u.archRange) +
           " as " + quote(u.alias) + range(u.aliasRange));
    for (const auto &d : a.defs)
      def(*d);
    if (!a.model)
      line("model <none>");
    else
      model(*a.model);
    for (const auto &g : a.graphs)
      model(*g);
  }

  void model(const ast::ModelDecl &md) {
    std::string outs;
    for (const ast::Target &t : md.outputs)
      outs += " " + target(t);
    line("model " + range(md.range) + " " + quote(md.name) +
         range(md.nameRange) + " outputs" + outs);
    Indent j(*this);
    for (const ast::ModelInput &in : md.inputs) {
      line("input " + range(in.range) + " " + quote(in.name) + " " +
           quote(in.dtype) + range(in.dtypeRange));
      Indent k(*this);
      for (const auto &d : in.dims)
        expr("dim", d.get());
    }
    stmts("body", md.body);
  }
};

/// The canonical text of `file` (equal texts: equal ASTs).
inline std::string dumpAst(const ast::File &file) {
  return AstDumper().dump(file);
}

} // namespace archc::test

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif // ARCHC_TESTS_ASTDUMP_H
