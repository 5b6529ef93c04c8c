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

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

namespace archc {
namespace {

using grammar::ArchLexer;
using grammar::ArchParser;

/// Converts ANTLR's (line, char column) to our (line, byte column).
class LocMapper {
public:
  LocMapper(uint32_t fileId, const SourceMgr &sm) : fileId(fileId), sm(sm) {}

  SourceLoc loc(size_t line, size_t charCol) const {
    // Lines are checked once for non-ASCII bytes; on ASCII lines characters
    // are bytes.
    if (line < asciiLine.size() && asciiLine[line] == 1)
      return {fileId, static_cast<uint32_t>(line),
              static_cast<uint32_t>(charCol + 1)};
    std::string_view text = sm.getLine(fileId, static_cast<uint32_t>(line));
    if (line >= asciiLine.size())
      asciiLine.resize(line + 1, 0);
    if (asciiLine[line] == 0) {
      bool ascii = true;
      for (char ch : text)
        ascii &= static_cast<unsigned char>(ch) < 0x80;
      asciiLine[line] = ascii ? 1 : 2;
      if (ascii)
        return {fileId, static_cast<uint32_t>(line),
                static_cast<uint32_t>(charCol + 1)};
    }
    size_t byte = 0, chars = 0;
    while (byte < text.size() && chars < charCol) {
      unsigned char c = static_cast<unsigned char>(text[byte]);
      size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
      byte += len;
      ++chars;
    }
    if (chars < charCol)
      byte += charCol - chars;
    return {fileId, static_cast<uint32_t>(line),
            static_cast<uint32_t>(byte + 1)};
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
  SourceRange range(antlr4::Token *t) const { return {begin(t), end(t)}; }
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
  mutable std::vector<uint8_t> asciiLine; ///< 0 unknown, 1 ASCII, 2 not
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

/// A hand-written lexer for the token types of Arch.g4, used instead of the
/// generated ArchLexer because ANTLR's C++ lexer simulator costs ~1000
/// instructions per character. It produces exactly the generated lexer's
/// tokens (the unit tests compare both on every bundled file); keyword and
/// punctuation types come from the generated vocabulary, so grammar edits
/// carry over.
class ArchTokenSource : public antlr4::TokenSource {
public:
  ArchTokenSource(std::string_view text, const LocMapper &m,
                  DiagnosticEngine *diags,
                  const antlr4::dfa::Vocabulary &vocabulary)
      : text(text), mapper(m), diags(diags) {
    static const Tables tables = buildTables(vocabulary);
    tab = &tables;
  }

  std::unique_ptr<antlr4::Token> nextToken() override {
    while (true) {
      skipTrivia();
      if (pos >= text.size()) {
        auto t = make(antlr4::Token::EOF, pos, pos, "<EOF>");
        return t;
      }
      size_t start = pos, startLine = line, startCol = col;
      char c = text[pos];
      if (isIdentStart(c)) {
        while (pos < text.size() && isIdentPart(text[pos]))
          advance();
        std::string word(text.substr(start, pos - start));
        auto kw = tab->literals.find(word);
        size_t type = kw != tab->literals.end()
                          ? kw->second
                          : static_cast<size_t>(ArchParser::ID);
        return make(type, start, pos, word, startLine, startCol);
      }
      if (isDigit(c))
        return number(start, startLine, startCol);
      if (c == '"')
        return string(start, startLine, startCol);
      // Longest punctuation match (candidates by first character, longest
      // first).
      size_t best = 0, bestType = 0;
      for (const auto &[p, type] :
           tab->punctuation[static_cast<unsigned char>(c)])
        if (text.compare(pos, p.size(), p) == 0) {
          best = p.size();
          bestType = type;
          break;
        }
      if (best) {
        for (size_t k = 0; k < best; ++k)
          advance();
        return make(bestType, start, pos, std::string(text.substr(start, best)),
                    startLine, startCol);
      }
      // Not a token: report like ANTLR and skip the character.
      size_t len = utf8Length(static_cast<unsigned char>(c));
      std::string bad(text.substr(pos, len));
      if (diags)
        diags->error(SourceRange(mapper.loc(startLine, startCol),
                                 mapper.loc(startLine, startCol + 1)),
                     "token recognition error at: '{}'", bad);
      ++errors;
      advance();
    }
  }

  size_t getLine() const override { return line; }
  size_t getCharPositionInLine() override { return col; }
  antlr4::CharStream *getInputStream() override { return nullptr; }
  std::string getSourceName() override { return "arch"; }
  antlr4::TokenFactory<antlr4::CommonToken> *getTokenFactory() override {
    return antlr4::CommonTokenFactory::DEFAULT.get();
  }

  unsigned errors = 0;

private:
  struct Tables {
    std::map<std::string, size_t> literals; ///< keywords
    /// Punctuation tokens by first character, longest first.
    std::array<std::vector<std::pair<std::string, size_t>>, 256> punctuation;
  };
  static Tables buildTables(const antlr4::dfa::Vocabulary &v) {
    Tables t;
    for (size_t i = 1; i <= v.getMaxTokenType(); ++i) {
      std::string lit = v.getLiteralName(i);
      if (lit.size() < 3 || lit.front() != '\'' || lit.back() != '\'')
        continue;
      std::string body = lit.substr(1, lit.size() - 2);
      if (isIdentStart(body[0]))
        t.literals[body] = i;
      else
        t.punctuation[static_cast<unsigned char>(body[0])].emplace_back(body,
                                                                        i);
    }
    for (auto &list : t.punctuation)
      std::stable_sort(list.begin(), list.end(),
                       [](const auto &a, const auto &b) {
                         return a.first.size() > b.first.size();
                       });
    return t;
  }

  static bool isIdentStart(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  static bool isIdentPart(char c) { return isIdentStart(c) || isDigit(c); }
  static bool isDigit(char c) { return c >= '0' && c <= '9'; }
  static size_t utf8Length(unsigned char c) {
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
  }

  /// Moves past one character (a whole UTF-8 sequence).
  void advance() {
    unsigned char c = static_cast<unsigned char>(text[pos]);
    pos += std::min(utf8Length(c), text.size() - pos);
    ++charIndex;
    if (c == '\n') {
      ++line;
      col = 0;
    } else {
      ++col;
    }
  }

  void skipTrivia() {
    while (pos < text.size()) {
      char c = text[pos];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f') {
        advance();
      } else if (c == '/' && pos + 1 < text.size() && text[pos + 1] == '/') {
        while (pos < text.size() && text[pos] != '\n' && text[pos] != '\r')
          advance();
      } else if (c == '/' && pos + 1 < text.size() && text[pos + 1] == '*') {
        size_t end = text.find("*/", pos + 2);
        if (end == std::string_view::npos)
          return; // lexed as '/' '*' like ANTLR; the parser reports it
        while (pos < end + 2)
          advance();
      } else {
        return;
      }
    }
  }

  std::unique_ptr<antlr4::Token> number(size_t start, size_t l, size_t c) {
    auto digits = [&]() {
      while (pos < text.size() && isDigit(text[pos]))
        advance();
    };
    auto exponentAt = [&](size_t p) {
      if (p >= text.size() || (text[p] != 'e' && text[p] != 'E'))
        return size_t(0);
      size_t q = p + 1;
      if (q < text.size() && (text[q] == '+' || text[q] == '-'))
        ++q;
      return q < text.size() && isDigit(text[q]) ? q - p : size_t(0);
    };
    digits();
    bool isFloat = false;
    if (pos + 1 < text.size() && text[pos] == '.' && isDigit(text[pos + 1])) {
      advance();
      digits();
      isFloat = true;
    }
    if (size_t e = exponentAt(pos)) {
      for (size_t k = 0; k < e; ++k)
        advance();
      digits();
      isFloat = true;
    }
    return make(
        static_cast<size_t>(isFloat ? ArchParser::FLOAT : ArchParser::INT),
        start, pos, std::string(text.substr(start, pos - start)), l, c);
  }

  std::unique_ptr<antlr4::Token> string(size_t start, size_t l, size_t c) {
    advance(); // opening quote
    while (pos < text.size()) {
      char ch = text[pos];
      if (ch == '"') {
        advance();
        return make(ArchParser::STRING, start, pos,
                    std::string(text.substr(start, pos - start)), l, c);
      }
      if (ch == '\n' || ch == '\r')
        break;
      if (ch == '\\') {
        advance();
        if (pos >= text.size() || text[pos] == '\n' || text[pos] == '\r')
          break;
      }
      advance();
    }
    if (diags)
      diags->error(SourceRange(mapper.loc(l, c), mapper.loc(l, c + 1)),
                   "unterminated string literal");
    ++errors;
    return nextToken();
  }

  std::unique_ptr<antlr4::Token> make(size_t type, size_t, size_t,
                                      std::string tokenText, size_t l = 0,
                                      size_t c = 0) {
    auto t = std::make_unique<antlr4::CommonToken>(
        std::pair<antlr4::TokenSource *, antlr4::CharStream *>(this, nullptr),
        type, antlr4::Token::DEFAULT_CHANNEL, charIndex, charIndex);
    t->setText(tokenText);
    if (type == antlr4::Token::EOF) {
      l = line;
      c = col;
    }
    t->setLine(l);
    t->setCharPositionInLine(c);
    t->setTokenIndex(tokenCount++);
    return t;
  }

  std::string_view text;
  const LocMapper &mapper;
  DiagnosticEngine *diags;
  const Tables *tab = nullptr;
  size_t pos = 0, line = 1, col = 0, charIndex = 0, tokenCount = 0;
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

  std::unique_ptr<ast::ModelDecl>
  buildModel(ArchParser::ModelDeclContext *ctx) {
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

  /// The token of a terminal child.
  static antlr4::Token *tokenAt(antlr4::ParserRuleContext *ctx, size_t i) {
    return static_cast<antlr4::tree::TerminalNode *>(ctx->children[i])
        ->getSymbol();
  }

  // Labeled alternatives are told apart by their first tokens (cheaper than
  // RTTI on every node).
  ast::StmtPtr buildStmt(ArchParser::StmtContext *ctx) {
    SourceRange r = m.range(ctx);
    switch (ctx->getStart()->getType()) {
    case ArchParser::FOR: {
      auto *f = static_cast<ArchParser::ForStmtContext *>(ctx);
      auto stmt = std::make_unique<ast::ForStmt>(r);
      stmt->var = {f->var->getText(), m.range(f->var)};
      stmt->lo = buildExpr(f->lo);
      stmt->hi = buildExpr(f->hi);
      // `for i in a .. b @ "scope"` parses the scope into the bound.
      if (auto *scoped = dyn_cast<ast::ScopeExpr>(stmt->hi.get())) {
        stmt->scope = scoped->scope;
        stmt->scopeRange = scoped->scopeRange;
        stmt->hi = std::move(scoped->inner);
      }
      stmt->body = buildBlock(f->body);
      return stmt;
    }
    case ArchParser::IF:
      return buildIf(static_cast<ArchParser::IfStmtContext *>(ctx)->ifChain());
    case ArchParser::RETURN: {
      std::vector<ast::ExprPtr> values;
      for (auto *e : static_cast<ArchParser::ReturnStmtContext *>(ctx)->expr())
        values.push_back(buildExpr(e));
      return std::make_unique<ast::ReturnStmt>(r, std::move(values));
    }
    case ArchParser::ERROR:
      return std::make_unique<ast::ErrorStmt>(
          r, unescape(static_cast<ArchParser::ErrorStmtContext *>(ctx)
                          ->message->getText()));
    case ArchParser::CHECK: {
      auto *c = static_cast<ArchParser::CheckStmtContext *>(ctx);
      std::optional<std::string> msg;
      if (c->message)
        msg = unescape(c->message->getText());
      return std::make_unique<ast::CheckStmt>(r, buildExpr(c->cond), msg);
    }
    default:
      break;
    }
    std::string second = tokenAt(ctx, 1)->getText();
    if (second == "+=" || second == "-=" || second == "*=") {
      auto *a = static_cast<ArchParser::AugAssignStmtContext *>(ctx);
      ast::BinaryOp bop = second == "+="   ? ast::BinaryOp::Add
                          : second == "-=" ? ast::BinaryOp::Sub
                                           : ast::BinaryOp::Mul;
      return std::make_unique<ast::AugAssignStmt>(
          r, ast::Target{a->target->getText(), m.range(a->target)}, bop,
          buildExpr(a->value));
    }
    auto *a = static_cast<ArchParser::AssignStmtContext *>(ctx);
    std::vector<ast::Target> targets;
    for (auto *child : a->children) {
      auto *term = dynamic_cast<antlr4::tree::TerminalNode *>(child);
      if (!term)
        break;
      if (term->getSymbol()->getType() == ArchParser::ID)
        targets.push_back({term->getText(), m.range(term->getSymbol())});
    }
    return std::make_unique<ast::AssignStmt>(r, std::move(targets),
                                             buildExpr(a->value));
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

  ast::ExprPtr buildExpr(ArchParser::ExprContext *ctx) {
    if (!ctx)
      return std::make_unique<ast::NoneExpr>(SourceRange());
    ast::ExprPtr c =
        buildChain(static_cast<ArchParser::ChainContext *>(ctx->children[0]));
    if (!ctx->then)
      return c;
    return std::make_unique<ast::CondExpr>(m.range(ctx), std::move(c),
                                           buildExpr(ctx->then),
                                           buildExpr(ctx->otherwise));
  }

  /// Binding strength of a binary operator (higher binds tighter); all are
  /// left-associative.
  static int precedence(const std::string &op) {
    if (op == "*" || op == "/" || op == "//" || op == "%")
      return 7;
    if (op == "+" || op == "-")
      return 6;
    if (op == "<" || op == "<=" || op == ">" || op == ">=" || op == "==" ||
        op == "!=")
      return 5;
    if (op == "in" || op == "not in")
      return 4;
    if (op == "&&" || op == "and")
      return 3;
    return 2; // || or
  }

  struct ChainOp {
    std::string text;
    SourceRange range;
  };

  ast::ExprPtr buildChain(ArchParser::ChainContext *ctx) {
    if (ctx->children.size() == 1)
      return buildUnary(
          static_cast<ArchParser::UnaryContext *>(ctx->children[0]));
    std::vector<ast::ExprPtr> operands;
    std::vector<ChainOp> ops;
    for (size_t i = 0; i < ctx->children.size(); ++i) {
      auto *rule = static_cast<antlr4::ParserRuleContext *>(ctx->children[i]);
      if (i % 2 == 0) {
        operands.push_back(
            buildUnary(static_cast<ArchParser::UnaryContext *>(rule)));
        continue;
      }
      // binaryOp: one token, or `not in`.
      std::string text = tokenAt(rule, 0)->getText();
      if (rule->children.size() == 2)
        text = "not in";
      ops.push_back({text, m.range(rule)});
    }
    return climbAll(operands, ops);
  }

  /// Shunting-yard style reduction keeping operand/operator order.
  ast::ExprPtr climbAll(std::vector<ast::ExprPtr> &operands,
                        const std::vector<ChainOp> &ops) {
    std::vector<ast::ExprPtr> values;
    std::vector<const ChainOp *> stack;
    auto reduce = [&]() {
      const ChainOp *op = stack.back();
      stack.pop_back();
      ast::ExprPtr rhs = std::move(values.back());
      values.pop_back();
      ast::ExprPtr lhs = std::move(values.back());
      values.pop_back();
      SourceRange r(lhs->getRange().begin, rhs->getRange().end);
      if (op->text == "in" || op->text == "not in")
        values.push_back(std::make_unique<ast::InExpr>(
            r, std::move(lhs), std::move(rhs), op->text == "not in"));
      else
        values.push_back(std::make_unique<ast::BinaryExpr>(
            r, binaryOp(op->text), std::move(lhs), std::move(rhs), op->range));
    };
    values.push_back(std::move(operands[0]));
    for (size_t k = 0; k < ops.size(); ++k) {
      int prec = precedence(ops[k].text);
      while (!stack.empty() && precedence(stack.back()->text) >= prec)
        reduce();
      stack.push_back(&ops[k]);
      values.push_back(std::move(operands[k + 1]));
    }
    while (!stack.empty())
      reduce();
    return std::move(values.back());
  }

  ast::ExprPtr buildUnary(ArchParser::UnaryContext *ctx) {
    // PrefixUnary has two children (operator, operand); PostfixUnary one.
    if (ctx->children.size() == 2) {
      ast::UnaryOp op = tokenAt(ctx, 0)->getText() == "-" ? ast::UnaryOp::Neg
                                                          : ast::UnaryOp::Not;
      return std::make_unique<ast::UnaryExpr>(
          m.range(ctx), op,
          buildUnary(
              static_cast<ArchParser::UnaryContext *>(ctx->children[1])));
    }
    return buildPostfix(
        static_cast<ArchParser::PostfixContext *>(ctx->children[0]));
  }

  ast::ExprPtr buildPostfix(ArchParser::PostfixContext *ctx) {
    ast::ExprPtr e = buildPrimary(
        static_cast<ArchParser::PrimaryContext *>(ctx->children[0]));
    SourceLoc begin = m.begin(ctx->getStart());
    for (size_t i = 1; i < ctx->children.size(); ++i) {
      auto *op = static_cast<ArchParser::PostfixOpContext *>(ctx->children[i]);
      SourceRange r(begin, m.range(op).end);
      std::string lead = op->getStart()->getText();
      if (lead == ".") {
        auto *mem = static_cast<ArchParser::MemberOpContext *>(op);
        e = std::make_unique<ast::MemberExpr>(
            r, std::move(e), mem->member->getText(), m.range(mem->member));
      } else if (lead == "(") {
        auto *call = static_cast<ArchParser::CallOpContext *>(op);
        std::vector<ast::Arg> args;
        if (auto *list = call->argList()) {
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
        e = std::make_unique<ast::CallExpr>(r, std::move(e), std::move(args));
      } else if (lead == "[") {
        auto *idx = static_cast<ArchParser::IndexOpContext *>(op);
        e = std::make_unique<ast::IndexExpr>(r, std::move(e),
                                             buildExpr(idx->index));
      } else {
        auto *sc = static_cast<ArchParser::ScopeOpContext *>(op);
        e = std::make_unique<ast::ScopeExpr>(r, std::move(e),
                                             unescape(sc->scope->getText()),
                                             m.range(sc->scope));
      }
    }
    return e;
  }

  ast::ExprPtr buildPrimary(ArchParser::PrimaryContext *ctx) {
    SourceRange r = m.range(ctx);
    antlr4::Token *start = ctx->getStart();
    switch (start->getType()) {
    case ArchParser::INT: {
      const std::string text = start->getText();
      errno = 0;
      long long v = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) {
        diags.error(r, "integer literal '{}' is too large (the limit is {})",
                    text.size() > 40 ? text.substr(0, 40) + "..." : text,
                    INT64_MAX);
        v = 0;
      }
      return std::make_unique<ast::IntExpr>(r, v);
    }
    case ArchParser::FLOAT: {
      const std::string text = start->getText();
      double v = std::strtod(text.c_str(), nullptr);
      if (!std::isfinite(v)) {
        diags.error(r, "floating-point literal '{}' is out of range",
                    text.size() > 40 ? text.substr(0, 40) + "..." : text);
        v = 0;
      }
      return std::make_unique<ast::FloatExpr>(r, v);
    }
    case ArchParser::STRING:
      return std::make_unique<ast::StringExpr>(r, unescape(start->getText()));
    case ArchParser::TRUE:
    case ArchParser::FALSE:
      return std::make_unique<ast::BoolExpr>(r, start->getType() ==
                                                    ArchParser::TRUE);
    case ArchParser::NONE:
      return std::make_unique<ast::NoneExpr>(r);
    case ArchParser::ID:
      return std::make_unique<ast::NameExpr>(r, start->getText());
    case ArchParser::FN: {
      auto *p = static_cast<ArchParser::FnLitContext *>(ctx);
      return std::make_unique<ast::FnExpr>(r, buildParams(p->paramList()),
                                           buildBlock(p->body));
    }
    default:
      break;
    }
    if (start->getText() == "(")
      return buildExpr(
          static_cast<ArchParser::ParenExprContext *>(ctx)->expr());
    std::vector<ast::ExprPtr> elems;
    for (auto *e : static_cast<ArchParser::ListLitContext *>(ctx)->expr())
      elems.push_back(buildExpr(e));
    return std::make_unique<ast::ListExpr>(r, std::move(elems));
  }
};

/// Rejects inputs whose nesting would exhaust the parser's (recursive)
/// stack: bracket depth, runs of prefix operators, and operator chains in
/// one expression, counted over the token stream before parsing.
/// What checkNesting needs to know of a token type, computed once per type
/// from the grammar's literal names.
enum TokenClass : uint8_t {
  kOpen = 1,        ///< ( [ {
  kClose = 2,       ///< ) ] }
  kPrefix = 4,      ///< - ! not (prefix when not after an operand)
  kOperator = 8,    ///< binary/postfix operators
  kReset = 16,      ///< ; { } = end an expression
  kEndsOperand = 32 ///< literals, names, ) ]
};

const std::vector<uint8_t> &tokenClasses(const antlr4::dfa::Vocabulary &v) {
  static const std::vector<uint8_t> classes = [&v] {
    std::vector<uint8_t> c(v.getMaxTokenType() + 1, 0);
    for (size_t type = 1; type < c.size(); ++type) {
      std::string lit = v.getLiteralName(type);
      std::string t =
          lit.size() >= 2 && lit.front() == '\'' && lit.back() == '\''
              ? lit.substr(1, lit.size() - 2)
              : "";
      auto is = [&](std::initializer_list<const char *> set) {
        for (const char *x : set)
          if (t == x)
            return true;
        return false;
      };
      uint8_t k = 0;
      k |= is({"(", "[", "{"}) ? kOpen : 0;
      k |= is({")", "]", "}"}) ? kClose : 0;
      k |= is({"-", "!", "not"}) ? kPrefix : 0;
      k |= is({"+", "-",  "*",  "/", "//",  "%",  "&&", "||", "==", "!=", "<",
               ">", "<=", ">=", "?", "and", "or", ".",  "@",  "!",  "not"})
               ? kOperator
               : 0;
      k |= is({";", "{", "}", "="}) ? kReset : 0;
      k |= is({")", "]"}) ? kEndsOperand : 0;
      c[type] = k;
    }
    for (size_t type : {ArchParser::ID, ArchParser::INT, ArchParser::FLOAT,
                        ArchParser::STRING, ArchParser::TRUE, ArchParser::FALSE,
                        ArchParser::NONE})
      if (type < c.size())
        c[type] |= kEndsOperand;
    return c;
  }();
  return classes;
}

bool checkNesting(antlr4::CommonTokenStream &tokens,
                  const antlr4::dfa::Vocabulary &vocabulary, const LocMapper &m,
                  DiagnosticEngine &diags) {
  constexpr unsigned kMaxOperators = 16 * kMaxNestingDepth;
  const std::vector<uint8_t> &classes = tokenClasses(vocabulary);
  unsigned depth = 0, prefixRun = 0, operators = 0;
  bool afterOperand = false; // previous token ends an operand
  for (antlr4::Token *t : tokens.getTokens()) {
    size_t type = t->getType();
    if (type == antlr4::Token::EOF)
      break;
    uint8_t k = type < classes.size() ? classes[type] : 0;
    if (k & kOpen)
      ++depth;
    else if ((k & kClose) && depth > 0)
      --depth;
    bool prefix = !afterOperand && (k & kPrefix);
    prefixRun = prefix ? prefixRun + 1 : 0;
    if (k & kOperator)
      ++operators;
    else if (k & kReset)
      operators = 0;
    afterOperand = k & kEndsOperand;
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

std::vector<LexedToken> lexArch(const std::string &text) {
  SourceMgr sm;
  uint32_t id = sm.addBuffer("lex.arch", text);
  LocMapper mapper(id, sm);
  antlr4::CommonTokenStream tokens(nullptr);
  ArchParser parser(&tokens);
  ArchTokenSource lexer(text, mapper, nullptr, parser.getVocabulary());
  std::vector<LexedToken> out;
  while (true) {
    auto t = lexer.nextToken();
    out.push_back(
        {t->getType(), t->getText(), t->getLine(), t->getCharPositionInLine()});
    if (t->getType() == antlr4::Token::EOF)
      return out;
  }
}

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
    // The parser is created first: its vocabulary gives the lexer the
    // keyword and punctuation token types.
    antlr4::CommonTokenStream tokens(nullptr);
    ArchParser parser(&tokens);
    ArchTokenSource lexer(text, mapper, &diags, parser.getVocabulary());
    tokens.setTokenSource(&lexer);
    tokens.fill();
    if (lexer.errors)
      return nullptr;
    if (!checkNesting(tokens, parser.getVocabulary(), mapper, diags))
      return nullptr;
    // Two-stage parse: the fast SLL prediction mode with a bail-out error
    // strategy handles every valid file; only when it fails is the input
    // re-parsed in full LL mode with normal error reporting.
    parser.setTokenStream(&tokens);
    parser.removeErrorListeners();
    parser.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(
        antlr4::atn::PredictionMode::SLL);
    parser.setErrorHandler(std::make_shared<antlr4::BailErrorStrategy>());
    ArchParser::FileContext *tree = nullptr;
    try {
      tree = parser.file();
    } catch (const antlr4::ParseCancellationException &) {
      tree = nullptr;
    }
    if (!tree) {
      tokens.seek(0);
      parser.reset();
      parser.addErrorListener(&listener);
      parser.setErrorHandler(std::make_shared<antlr4::DefaultErrorStrategy>());
      parser.getInterpreter<antlr4::atn::ParserATNSimulator>()
          ->setPredictionMode(antlr4::atn::PredictionMode::LL);
      tree = parser.file();
    }
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
