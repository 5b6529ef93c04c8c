//===- Parser.cpp - ANTLR4 parse tree to AST --------------------*- C++ -*-===//
//
// This file implements the .arch front end: UTF-8 validation, lexing and
// parsing with the generated ArchLexer/ArchParser, syntax error reporting,
// a nesting-depth guard, and the AstBuilder that turns the parse tree into
// archc::ast nodes with source ranges. It is the only file that includes
// ANTLR headers.
//
//===----------------------------------------------------------------------===//
#include "frontend/Parser.h"

#include "ArchLexer.h"
#include "ArchParser.h"
#include "antlr4-runtime.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace archc {
namespace {

using grammar::ArchLexer;
using grammar::ArchParser;

/// Converts ANTLR's (line, char column) to our (line, byte column).
class LocMapper {
public:
  LocMapper(uint32_t fileId, const SourceMgr &sm) : fileId(fileId), sm(sm) {}

  SourceLoc loc(size_t line, size_t charCol) const {
    std::string_view text = sm.getLine(fileId, static_cast<uint32_t>(line));
    size_t byte = 0, chars = 0;
    while (byte < text.size() && chars < charCol) {
      unsigned char c = static_cast<unsigned char>(text[byte]);
      size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
      byte += len;
      ++chars;
    }
    if (chars < charCol)
      byte += charCol - chars;
    return {fileId, static_cast<uint32_t>(line), static_cast<uint32_t>(byte + 1)};
  }

  SourceLoc begin(antlr4::Token *t) const {
    return loc(t->getLine(), t->getCharPositionInLine());
  }
  SourceLoc end(antlr4::Token *t) const {
    if (t->getType() == antlr4::Token::EOF)
      return begin(t);
    // Tokens never span lines except block comments and strings (which
    // cannot contain newlines), so the end is on the same line.
    size_t len = 0;
    for (char c : t->getText())
      if ((static_cast<unsigned char>(c) & 0xC0) != 0x80)
        ++len;
    return loc(t->getLine(), t->getCharPositionInLine() + len);
  }
  SourceRange range(antlr4::Token *t) const {
    return {begin(t), end(t)};
  }
  SourceRange range(antlr4::ParserRuleContext *ctx) const {
    antlr4::Token *stop = ctx->getStop() ? ctx->getStop() : ctx->getStart();
    if (stop->getTokenIndex() < ctx->getStart()->getTokenIndex())
      stop = ctx->getStart();
    return {begin(ctx->getStart()), end(stop)};
  }
  SourceRange range(antlr4::Token *first, antlr4::Token *last) const {
    return {begin(first), end(last)};
  }

private:
  uint32_t fileId;
  const SourceMgr &sm;
};

/// Forwards lexer and parser syntax errors to the DiagnosticEngine.
class SyntaxErrorListener : public antlr4::BaseErrorListener {
public:
  SyntaxErrorListener(const LocMapper &m, DiagnosticEngine &d)
      : mapper(m), diags(d) {}

  void syntaxError(antlr4::Recognizer *, antlr4::Token *offending, size_t line,
                   size_t charPositionInLine, const std::string &msg,
                   std::exception_ptr) override {
    SourceLoc b = mapper.loc(line, charPositionInLine);
    SourceRange r(b, b);
    if (offending && offending->getType() != antlr4::Token::EOF)
      r = mapper.range(offending);
    std::string text = msg;
    // ANTLR spells end of input "<EOF>"; say it in words.
    size_t pos;
    while ((pos = text.find("<EOF>")) != std::string::npos)
      text.replace(pos, 5, "end of file");
    ++count;
    if (count <= 20)
      diags.error(r, "{}", text);
  }
  unsigned count = 0;

private:
  const LocMapper &mapper;
  DiagnosticEngine &diags;
};

/// Returns the byte offset of the first invalid UTF-8 sequence, or npos.
size_t findInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == 0)
      return i;
    size_t len;
    if (c < 0x80)
      len = 1;
    else if ((c >> 5) == 6)
      len = 2;
    else if ((c >> 4) == 14)
      len = 3;
    else if ((c >> 3) == 30)
      len = 4;
    else
      return i;
    if (i + len > s.size())
      return i;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2)
        return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string unescape(const std::string &quoted) {
  std::string out;
  for (size_t i = 1; i + 1 < quoted.size(); ++i) {
    char c = quoted[i];
    if (c == '\\' && i + 2 < quoted.size()) {
      char n = quoted[++i];
      switch (n) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      default:
        out += n;
      }
    } else {
      out += c;
    }
  }
  return out;
}

/// Builds AST nodes from parse-tree contexts.
class AstBuilder {
public:
  AstBuilder(uint32_t fileId, const LocMapper &m, DiagnosticEngine &d)
      : fileId(fileId), m(m), diags(d) {}

  std::unique_ptr<ast::File> buildFile(ArchParser::FileContext *ctx) {
    auto file = std::make_unique<ast::File>();
    file->fileId = fileId;
    for (auto *item : ctx->item()) {
      if (auto *imp = item->importDecl()) {
        file->imports.push_back({m.range(imp), unescape(imp->path->getText())});
      } else if (auto *arch = item->archDecl()) {
        file->archs.push_back(buildArch(arch));
      } else if (auto *def = item->defDecl()) {
        file->defs.push_back(buildDef(def));
      }
    }
    return file;
  }

private:
  uint32_t fileId;
  const LocMapper &m;
  DiagnosticEngine &diags;

  std::unique_ptr<ast::ArchDecl> buildArch(ArchParser::ArchDeclContext *ctx) {
    auto arch = std::make_unique<ast::ArchDecl>();
    arch->range = m.range(ctx);
    arch->name = ctx->name->getText();
    arch->nameRange = m.range(ctx->name);
    for (auto *s : ctx->STRING())
      arch->matches.push_back(unescape(s->getText()));
    bool sawConfig = false;
    for (auto *member : ctx->archMember()) {
      if (auto *cfg = member->configBlock()) {
        if (sawConfig)
          diags.error(m.range(cfg->getStart()),
                      "an arch may have only one config block");
        sawConfig = true;
        for (auto *entry : cfg->configEntry())
          arch->config.push_back(buildConfigEntry(entry));
      } else if (auto *def = member->defDecl()) {
        arch->defs.push_back(buildDef(def));
      } else if (auto *model = member->modelDecl()) {
        if (arch->model)
          diags.error(m.range(model->getStart()),
                      "an arch may have only one model");
        else
          arch->model = buildModel(model);
      }
    }
    return arch;
  }

  ast::ConfigEntry buildConfigEntry(ArchParser::ConfigEntryContext *ctx) {
    ast::ConfigEntry e;
    e.range = m.range(ctx);
    if (auto *f = dynamic_cast<ArchParser::ConfigFieldContext *>(ctx)) {
      e.kind = ast::ConfigEntry::Kind::Field;
      e.name = f->name->getText();
      e.nameRange = m.range(f->name);
      e.type = buildType(f->typeRef());
      if (f->value)
        e.value = buildExpr(f->value);
      for (auto *s : f->STRING())
        e.aliases.push_back(unescape(s->getText()));
    } else if (auto *l = dynamic_cast<ArchParser::ConfigLetContext *>(ctx)) {
      e.kind = ast::ConfigEntry::Kind::Let;
      e.name = l->name->getText();
      e.nameRange = m.range(l->name);
      if (l->typeRef())
        e.type = buildType(l->typeRef());
      e.value = buildExpr(l->value);
    } else if (auto *c = dynamic_cast<ArchParser::ConfigCheckContext *>(ctx)) {
      e.kind = ast::ConfigEntry::Kind::Check;
      e.value = buildExpr(c->cond);
      if (c->message)
        e.message = unescape(c->message->getText());
    }
    return e;
  }

  std::unique_ptr<ast::TypeRef> buildType(ArchParser::TypeRefContext *ctx) {
    auto t = std::make_unique<ast::TypeRef>();
    t->range = m.range(ctx);
    t->name = ctx->name->getText();
    if (ctx->elem)
      t->elem = buildType(ctx->elem);
    t->optional = ctx->optional != nullptr;
    return t;
  }

  std::vector<ast::Param> buildParams(ArchParser::ParamListContext *ctx) {
    std::vector<ast::Param> params;
    if (!ctx)
      return params;
    for (auto *p : ctx->param()) {
      ast::Param param;
      param.range = m.range(p);
      param.name = p->name->getText();
      if (p->typeRef())
        param.type = buildType(p->typeRef());
      if (p->value)
        param.defaultValue = buildExpr(p->value);
      params.push_back(std::move(param));
    }
    return params;
  }

  std::unique_ptr<ast::DefDecl> buildDef(ArchParser::DefDeclContext *ctx) {
    auto def = std::make_unique<ast::DefDecl>();
    def->range = m.range(ctx);
    def->name = ctx->name->getText();
    def->nameRange = m.range(ctx->name);
    def->params = buildParams(ctx->paramList());
    def->body = buildBlock(ctx->body);
    def->fileId = fileId;
    return def;
  }

  std::unique_ptr<ast::ModelDecl> buildModel(ArchParser::ModelDeclContext *ctx) {
    auto model = std::make_unique<ast::ModelDecl>();
    model->range = m.range(ctx);
    if (auto *inputs = ctx->inputList()) {
      for (auto *in : inputs->modelInput()) {
        ast::ModelInput input;
        input.range = m.range(in);
        input.name = in->name->getText();
        input.dtype = in->dtype->getText();
        input.dtypeRange = m.range(in->dtype);
        for (auto *d : in->expr())
          input.dims.push_back(buildExpr(d));
        model->inputs.push_back(std::move(input));
      }
    }
    for (auto *id : ctx->ID())
      model->outputs.push_back({id->getText(), m.range(id->getSymbol())});
    model->body = buildBlock(ctx->body);
    return model;
  }

  std::vector<ast::StmtPtr> buildBlock(ArchParser::BlockContext *ctx) {
    std::vector<ast::StmtPtr> stmts;
    for (auto *s : ctx->stmt())
      if (auto stmt = buildStmt(s))
        stmts.push_back(std::move(stmt));
    return stmts;
  }

  ast::StmtPtr buildStmt(ArchParser::StmtContext *ctx) {
    SourceRange r = m.range(ctx);
    if (auto *a = dynamic_cast<ArchParser::AssignStmtContext *>(ctx)) {
      std::vector<ast::Target> targets;
      for (auto *id : a->ID())
        targets.push_back({id->getText(), m.range(id->getSymbol())});
      return std::make_unique<ast::AssignStmt>(r, std::move(targets),
                                               buildExpr(a->value));
    }
    if (auto *a = dynamic_cast<ArchParser::AugAssignStmtContext *>(ctx)) {
      std::string op = a->op->getText();
      ast::BinaryOp bop = op == "+="   ? ast::BinaryOp::Add
                          : op == "-=" ? ast::BinaryOp::Sub
                                       : ast::BinaryOp::Mul;
      return std::make_unique<ast::AugAssignStmt>(
          r, ast::Target{a->target->getText(), m.range(a->target)}, bop,
          buildExpr(a->value));
    }
    if (auto *f = dynamic_cast<ArchParser::ForStmtContext *>(ctx)) {
      auto stmt = std::make_unique<ast::ForStmt>(r);
      stmt->var = {f->var->getText(), m.range(f->var)};
      stmt->lo = buildExpr(f->lo);
      stmt->hi = buildExpr(f->hi);
      // `for i in a .. b @ "scope"` parses the scope into the bound.
      if (auto *scoped = dynamic_cast<ast::ScopeExpr *>(stmt->hi.get())) {
        stmt->scope = scoped->scope;
        stmt->scopeRange = scoped->scopeRange;
        stmt->hi = std::move(scoped->inner);
      }
      stmt->body = buildBlock(f->body);
      return stmt;
    }
    if (auto *i = dynamic_cast<ArchParser::IfStmtContext *>(ctx))
      return buildIf(i->ifChain());
    if (auto *ret = dynamic_cast<ArchParser::ReturnStmtContext *>(ctx)) {
      std::vector<ast::ExprPtr> values;
      for (auto *e : ret->expr())
        values.push_back(buildExpr(e));
      return std::make_unique<ast::ReturnStmt>(r, std::move(values));
    }
    if (auto *e = dynamic_cast<ArchParser::ErrorStmtContext *>(ctx))
      return std::make_unique<ast::ErrorStmt>(r,
                                              unescape(e->message->getText()));
    if (auto *c = dynamic_cast<ArchParser::CheckStmtContext *>(ctx)) {
      std::optional<std::string> msg;
      if (c->message)
        msg = unescape(c->message->getText());
      return std::make_unique<ast::CheckStmt>(r, buildExpr(c->cond), msg);
    }
    return nullptr;
  }

  ast::StmtPtr buildIf(ArchParser::IfChainContext *ctx) {
    auto stmt = std::make_unique<ast::IfStmt>(m.range(ctx));
    stmt->cond = buildExpr(ctx->cond);
    stmt->then = buildBlock(ctx->then);
    if (ctx->elseIf) {
      stmt->hasElse = true;
      stmt->otherwise.push_back(buildIf(ctx->elseIf));
    } else if (ctx->otherwise) {
      stmt->hasElse = true;
      stmt->otherwise = buildBlock(ctx->otherwise);
    }
    return stmt;
  }

  static ast::BinaryOp binaryOp(const std::string &op) {
    if (op == "*")
      return ast::BinaryOp::Mul;
    if (op == "/")
      return ast::BinaryOp::Div;
    if (op == "//")
      return ast::BinaryOp::FloorDiv;
    if (op == "%")
      return ast::BinaryOp::Mod;
    if (op == "+")
      return ast::BinaryOp::Add;
    if (op == "-")
      return ast::BinaryOp::Sub;
    if (op == "<")
      return ast::BinaryOp::Lt;
    if (op == "<=")
      return ast::BinaryOp::Le;
    if (op == ">")
      return ast::BinaryOp::Gt;
    if (op == ">=")
      return ast::BinaryOp::Ge;
    if (op == "==")
      return ast::BinaryOp::Eq;
    if (op == "!=")
      return ast::BinaryOp::Ne;
    if (op == "&&" || op == "and")
      return ast::BinaryOp::And;
    return ast::BinaryOp::Or;
  }

  ast::ExprPtr binary(ArchParser::ExprContext *ctx, antlr4::Token *op,
                      ArchParser::ExprContext *l, ArchParser::ExprContext *r) {
    return std::make_unique<ast::BinaryExpr>(m.range(ctx),
                                             binaryOp(op->getText()),
                                             buildExpr(l), buildExpr(r),
                                             m.range(op));
  }

  ast::ExprPtr buildExpr(ArchParser::ExprContext *ctx) {
    if (!ctx)
      return std::make_unique<ast::NoneExpr>(SourceRange());
    SourceRange r = m.range(ctx);
    if (auto *p = dynamic_cast<ArchParser::PrimaryExprContext *>(ctx))
      return buildPrimary(p->primary());
    if (auto *e = dynamic_cast<ArchParser::MemberExprContext *>(ctx))
      return std::make_unique<ast::MemberExpr>(r, buildExpr(e->expr()),
                                               e->member->getText(),
                                               m.range(e->member));
    if (auto *e = dynamic_cast<ArchParser::CallExprContext *>(ctx)) {
      std::vector<ast::Arg> args;
      if (auto *list = e->argList()) {
        for (auto *a : list->arg()) {
          ast::Arg arg;
          if (a->name) {
            arg.name = a->name->getText();
            arg.nameRange = m.range(a->name);
          }
          arg.value = buildExpr(a->value);
          args.push_back(std::move(arg));
        }
      }
      return std::make_unique<ast::CallExpr>(r, buildExpr(e->expr()),
                                             std::move(args));
    }
    if (auto *e = dynamic_cast<ArchParser::IndexExprContext *>(ctx))
      return std::make_unique<ast::IndexExpr>(r, buildExpr(e->expr(0)),
                                              buildExpr(e->index));
    if (auto *e = dynamic_cast<ArchParser::ScopeExprContext *>(ctx))
      return std::make_unique<ast::ScopeExpr>(r, buildExpr(e->expr()),
                                              unescape(e->scope->getText()),
                                              m.range(e->scope));
    if (auto *e = dynamic_cast<ArchParser::UnaryExprContext *>(ctx)) {
      ast::UnaryOp op =
          e->op->getText() == "-" ? ast::UnaryOp::Neg : ast::UnaryOp::Not;
      return std::make_unique<ast::UnaryExpr>(r, op, buildExpr(e->expr()));
    }
    if (auto *e = dynamic_cast<ArchParser::MulExprContext *>(ctx))
      return binary(ctx, e->op, e->lhs, e->rhs);
    if (auto *e = dynamic_cast<ArchParser::AddExprContext *>(ctx))
      return binary(ctx, e->op, e->lhs, e->rhs);
    if (auto *e = dynamic_cast<ArchParser::CompareExprContext *>(ctx))
      return binary(ctx, e->op, e->lhs, e->rhs);
    if (auto *e = dynamic_cast<ArchParser::AndExprContext *>(ctx))
      return binary(ctx, e->op, e->lhs, e->rhs);
    if (auto *e = dynamic_cast<ArchParser::OrExprContext *>(ctx))
      return binary(ctx, e->op, e->lhs, e->rhs);
    if (auto *e = dynamic_cast<ArchParser::InExprContext *>(ctx))
      return std::make_unique<ast::InExpr>(r, buildExpr(e->lhs),
                                           buildExpr(e->rhs),
                                           e->NOT() != nullptr);
    if (auto *e = dynamic_cast<ArchParser::CondExprContext *>(ctx))
      return std::make_unique<ast::CondExpr>(r, buildExpr(e->cond),
                                             buildExpr(e->then),
                                             buildExpr(e->otherwise));
    return std::make_unique<ast::NoneExpr>(r);
  }

  ast::ExprPtr buildPrimary(ArchParser::PrimaryContext *ctx) {
    SourceRange r = m.range(ctx);
    if (auto *p = dynamic_cast<ArchParser::IntLitContext *>(ctx)) {
      const std::string text = p->INT()->getText();
      errno = 0;
      char *end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (errno == ERANGE) {
        diags.error(r, "integer literal '{}' is too large (the limit is {})",
                    text.size() > 40 ? text.substr(0, 40) + "..." : text,
                    INT64_MAX);
        v = 0;
      }
      return std::make_unique<ast::IntExpr>(r, v);
    }
    if (auto *p = dynamic_cast<ArchParser::FloatLitContext *>(ctx)) {
      const std::string text = p->FLOAT()->getText();
      double v = std::strtod(text.c_str(), nullptr);
      if (!std::isfinite(v)) {
        diags.error(r, "floating-point literal '{}' is out of range",
                    text.size() > 40 ? text.substr(0, 40) + "..." : text);
        v = 0;
      }
      return std::make_unique<ast::FloatExpr>(r, v);
    }
    if (auto *p = dynamic_cast<ArchParser::StringLitContext *>(ctx))
      return std::make_unique<ast::StringExpr>(r,
                                               unescape(p->STRING()->getText()));
    if (auto *p = dynamic_cast<ArchParser::BoolLitContext *>(ctx))
      return std::make_unique<ast::BoolExpr>(r, p->TRUE() != nullptr);
    if (dynamic_cast<ArchParser::NoneLitContext *>(ctx))
      return std::make_unique<ast::NoneExpr>(r);
    if (auto *p = dynamic_cast<ArchParser::NameRefContext *>(ctx))
      return std::make_unique<ast::NameExpr>(r, p->ID()->getText());
    if (auto *p = dynamic_cast<ArchParser::ParenExprContext *>(ctx))
      return buildExpr(p->expr());
    if (auto *p = dynamic_cast<ArchParser::ListLitContext *>(ctx)) {
      std::vector<ast::ExprPtr> elems;
      for (auto *e : p->expr())
        elems.push_back(buildExpr(e));
      return std::make_unique<ast::ListExpr>(r, std::move(elems));
    }
    if (auto *p = dynamic_cast<ArchParser::FnLitContext *>(ctx))
      return std::make_unique<ast::FnExpr>(r, buildParams(p->paramList()),
                                           buildBlock(p->body));
    return std::make_unique<ast::NoneExpr>(r);
  }
};

/// Rejects inputs whose nesting would exhaust the parser's (recursive)
/// stack: bracket depth, runs of prefix operators, and operator chains in
/// one expression, counted over the token stream before parsing.
bool checkNesting(antlr4::CommonTokenStream &tokens, const LocMapper &m,
                  DiagnosticEngine &diags) {
  constexpr unsigned kMaxOperators = 16 * kMaxNestingDepth;
  unsigned depth = 0, prefixRun = 0, operators = 0;
  bool afterOperand = false; // previous token ends an operand
  for (antlr4::Token *t : tokens.getTokens()) {
    const std::string text = t->getText();
    size_t type = t->getType();
    if (type == antlr4::Token::EOF)
      break;
    bool open = text == "(" || text == "[" || text == "{";
    bool close = text == ")" || text == "]" || text == "}";
    if (open)
      ++depth;
    else if (close && depth > 0)
      --depth;
    bool prefix = !afterOperand && (text == "-" || text == "!" || text == "not");
    prefixRun = prefix ? prefixRun + 1 : 0;
    bool isOperator = text == "+" || text == "-" || text == "*" ||
                      text == "/" || text == "//" || text == "%" ||
                      text == "&&" || text == "||" || text == "==" ||
                      text == "!=" || text == "<" || text == ">" ||
                      text == "<=" || text == ">=" || text == "?" ||
                      text == "and" || text == "or" || text == "." ||
                      text == "@" || text == "!" || text == "not";
    if (isOperator)
      ++operators;
    else if (text == ";" || text == "{" || text == "}" || text == "=")
      operators = 0;
    afterOperand = type == ArchParser::ID || type == ArchParser::INT ||
                   type == ArchParser::FLOAT || type == ArchParser::STRING ||
                   type == ArchParser::TRUE || type == ArchParser::FALSE ||
                   type == ArchParser::NONE || text == ")" || text == "]";
    std::string problem;
    if (depth > kMaxNestingDepth || prefixRun > kMaxNestingDepth)
      problem = fmt::format("expression or block nested too deeply (the "
                            "limit is {} levels)",
                            kMaxNestingDepth);
    else if (operators > kMaxOperators)
      problem = fmt::format("expression too long (more than {} operators)",
                            kMaxOperators);
    if (!problem.empty()) {
      diags.error(m.range(t), "{}", problem);
      return false;
    }
  }
  return true;
}

} // namespace

std::unique_ptr<ast::File> parseArchFile(uint32_t fileId, const SourceMgr &sm,
                                         DiagnosticEngine &diags) {
  std::string_view text = sm.getText(fileId);
  size_t bad = findInvalidUtf8(text);
  if (bad != std::string_view::npos) {
    SourceLoc loc = sm.getLoc(fileId, bad);
    diags.error(SourceRange(loc, loc),
                "file is not valid UTF-8 text (byte 0x{:02x} at offset {})",
                static_cast<unsigned char>(text[bad]), bad);
    return nullptr;
  }
  LocMapper mapper(fileId, sm);
  SyntaxErrorListener listener(mapper, diags);
  try {
    antlr4::ANTLRInputStream input(text.data(), text.size());
    ArchLexer lexer(&input);
    lexer.removeErrorListeners();
    lexer.addErrorListener(&listener);
    antlr4::CommonTokenStream tokens(&lexer);
    tokens.fill();
    if (listener.count)
      return nullptr;
    if (!checkNesting(tokens, mapper, diags))
      return nullptr;
    ArchParser parser(&tokens);
    parser.removeErrorListeners();
    parser.addErrorListener(&listener);
    ArchParser::FileContext *tree = parser.file();
    if (listener.count)
      return nullptr;
    unsigned before = diags.getNumErrors();
    AstBuilder builder(fileId, mapper, diags);
    auto file = builder.buildFile(tree);
    if (diags.getNumErrors() != before)
      return nullptr;
    return file;
  } catch (const std::exception &e) {
    diags.error(SourceRange(SourceLoc{fileId, 1, 1}),
                "internal parser failure: {}", e.what());
    return nullptr;
  }
}

} // namespace archc
