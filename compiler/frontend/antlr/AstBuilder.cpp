//===- AstBuilder.cpp - ANTLR4 parse tree to AST --------------------------===//
//
// Private to the front end. This file implements buildAst() with AstBuilder,
// an ArchVisitor:
//
//  - single-alternative rules (archDecl, typeRef, block, expr, chain, ...)
//    are read through their typed accessors and labels by the typed helpers
//    below;
//  - rules with alternatives (item, archMember, configEntry, stmt, binaryOp,
//    unary, postfixOp, primary) are dispatched with accept(): the visit
//    method of the alternative builds the node into the result slot of its
//    category (statement, expression, chain operator, postfix operation),
//    and the caller takes it from there; an empty slot is an internal error;
//  - operators are looked up by token type in the operator table
//    (OperatorTokens), which also gives precedence and associativity.
//
// Results travel in member slots, not in antlrcpp::Any, which would
// allocate for every node.
//
//===----------------------------------------------------------------------===//
#include "frontend/antlr/AstBuilder.h"

#include "frontend/antlr/Literals.h"
#include "frontend/antlr/OperatorTokens.h"

#include "ArchVisitor.h"

namespace archc::frontend {
namespace {

using grammar::ArchParser;

class AstBuilder final : public grammar::ArchVisitor {
public:
  AstBuilder(const ArchParser &parser, const TokenLocations &m,
             DiagnosticEngine &d)
      : ruleNames(parser.getRuleNames()),
        ops(operatorTokens(parser.getVocabulary())), m(m), diags(d) {}

  std::unique_ptr<ast::File> buildFile(ArchParser::FileContext *ctx) {
    auto result = std::make_unique<ast::File>();
    result->fileId = m.getFileId();
    file = result.get();
    for (auto *item : ctx->items)
      item->accept(this);
    file = nullptr;
    return result;
  }

  /// The expression of `node`, an expression rule or alternative.
  ast::ExprPtr expr(antlr4::tree::ParseTree *node) {
    if (!node)
      throw InternalParseError("the AST builder found no expression where "
                               "the grammar requires one",
                               SourceRange());
    node->accept(this);
    if (!exprResult)
      unexpected(node, "an expression");
    return std::move(exprResult);
  }

private:
  const std::vector<std::string> &ruleNames;
  const OperatorTokens &ops;
  const TokenLocations &m;
  DiagnosticEngine &diags;

  // Where the dispatched alternatives put what they build.
  ast::File *file = nullptr;     ///< items go here
  ast::ArchDecl *arch = nullptr; ///< members and config entries go here
  bool sawConfig = false;        ///< `arch` has a config block
  ast::StmtPtr stmtResult;       ///< from a stmt alternative
  ast::ExprPtr exprResult;       ///< from an expression rule/alternative
  const ast::OperatorInfo *infixOp = nullptr; ///< from a binaryOp alternative
  SourceRange infixRange;
  ast::ExprPtr postfixBase;   ///< the operand of the next postfixOp...
  SourceLoc postfixBegin;     ///< ...and where the postfix expression starts
  ast::ExprPtr postfixResult; ///< from a postfixOp alternative

  //===--------------------------------------------------------------------===//
  // Internal errors
  //===--------------------------------------------------------------------===//

  [[noreturn]] void unexpected(antlr4::tree::ParseTree *node,
                               const char *wanted) {
    SourceRange r;
    std::string what;
    if (auto *rule = dynamic_cast<antlr4::ParserRuleContext *>(node)) {
      r = m.range(rule);
      size_t index = rule->getRuleIndex();
      what = "rule '" +
             (index < ruleNames.size() ? ruleNames[index] : std::string("?")) +
             "'";
    } else {
      what = "token '" + node->getText() + "'";
      if (auto *term = dynamic_cast<antlr4::tree::TerminalNode *>(node))
        r = m.range(term->getSymbol());
    }
    throw InternalParseError(
        fmt::format("the AST builder expected {} but found {}", wanted, what),
        r);
  }

  /// Visit methods of rules that are read directly, never dispatched.
  [[noreturn]] antlrcpp::Any notDispatched(antlr4::ParserRuleContext *ctx) {
    unexpected(ctx, "a rule alternative");
  }

  //===--------------------------------------------------------------------===//
  // Declarations (typed helpers)
  //===--------------------------------------------------------------------===//

  std::unique_ptr<ast::ArchDecl> buildArch(ArchParser::ArchDeclContext *ctx) {
    auto result = std::make_unique<ast::ArchDecl>();
    result->range = m.range(ctx);
    result->name = ctx->name->getText();
    result->nameRange = m.range(ctx->name);
    if (ctx->base) {
      result->base = ctx->base->getText();
      result->baseRange = m.range(ctx->base);
    }
    for (antlr4::Token *s : ctx->matches)
      result->matches.push_back(unescape(s->getText()));
    if (ctx->claim) {
      if (ctx->claim->getText() != "model_type")
        diags.error(m.range(ctx->claim),
                    "expected 'model_type', 'matches' or '{{' after the arch "
                    "name, got '{}'",
                    ctx->claim->getText());
      result->modelTypesRange = m.range(ctx->claim);
      for (antlr4::Token *s : ctx->modelTypes)
        result->modelTypes.push_back(unescape(s->getText()));
    }
    ast::ArchDecl *outer = arch;
    bool outerSawConfig = sawConfig;
    arch = result.get();
    sawConfig = false;
    for (auto *member : ctx->members)
      member->accept(this);
    arch = outer;
    sawConfig = outerSawConfig;
    return result;
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
    for (auto *p : ctx->params) {
      ast::Param param;
      param.range = m.range(p);
      param.name = p->name->getText();
      if (auto *type = p->typeRef())
        param.type = buildType(type);
      if (p->value)
        param.defaultValue = exprOf(p->value);
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
    def->fileId = m.getFileId();
    return def;
  }

  std::unique_ptr<ast::ModelDecl>
  buildModel(ArchParser::ModelDeclContext *ctx) {
    auto model = std::make_unique<ast::ModelDecl>();
    model->range = m.range(ctx);
    if (ctx->name) {
      model->name = ctx->name->getText();
      model->nameRange = m.range(ctx->name);
    }
    if (auto *inputs = ctx->inputList()) {
      for (auto *in : inputs->inputs) {
        ast::ModelInput input;
        input.range = m.range(in);
        input.name = in->name->getText();
        input.dtype = in->dtype->getText();
        input.dtypeRange = m.range(in->dtype);
        for (auto *d : in->dims)
          input.dims.push_back(exprOf(d));
        model->inputs.push_back(std::move(input));
      }
    }
    for (antlr4::Token *id : ctx->outputs)
      model->outputs.push_back({id->getText(), m.range(id)});
    model->body = buildBlock(ctx->body);
    return model;
  }

  /// The arch whose member `ctx` is.
  ast::ArchDecl &archOf(antlr4::ParserRuleContext *ctx) {
    if (!arch)
      unexpected(ctx, "a member of an arch");
    return *arch;
  }

  /// Common part of the config entry alternatives.
  ast::ConfigEntry &newConfigEntry(antlr4::ParserRuleContext *ctx,
                                   ast::ConfigEntry::Kind kind) {
    ast::ConfigEntry &e = archOf(ctx).config.emplace_back();
    e.kind = kind;
    e.range = m.range(ctx);
    return e;
  }

  //===--------------------------------------------------------------------===//
  // Items, arch members and config entries (dispatched)
  //===--------------------------------------------------------------------===//

  antlrcpp::Any visitImportItem(ArchParser::ImportItemContext *ctx) override {
    auto *imp = ctx->importDecl();
    file->imports.push_back({m.range(imp), unescape(imp->path->getText())});
    return {};
  }
  antlrcpp::Any visitArchItem(ArchParser::ArchItemContext *ctx) override {
    file->archs.push_back(buildArch(ctx->archDecl()));
    return {};
  }
  antlrcpp::Any visitDefItem(ArchParser::DefItemContext *ctx) override {
    file->defs.push_back(buildDef(ctx->defDecl()));
    return {};
  }

  antlrcpp::Any
  visitConfigMember(ArchParser::ConfigMemberContext *ctx) override {
    auto *cfg = ctx->configBlock();
    archOf(ctx);
    if (sawConfig)
      diags.error(m.range(cfg->getStart()),
                  "an arch may have only one config block");
    sawConfig = true;
    for (auto *entry : cfg->entries)
      entry->accept(this);
    return {};
  }
  antlrcpp::Any visitDefMember(ArchParser::DefMemberContext *ctx) override {
    archOf(ctx).defs.push_back(buildDef(ctx->defDecl()));
    return {};
  }
  antlrcpp::Any visitUseMember(ArchParser::UseMemberContext *ctx) override {
    auto *use = ctx->useDecl();
    ast::UseDecl &u = archOf(ctx).uses.emplace_back();
    u.range = m.range(use);
    u.arch = use->arch->getText();
    u.archRange = m.range(use->arch);
    antlr4::Token *alias = use->alias ? use->alias : use->arch;
    u.alias = alias->getText();
    u.aliasRange = m.range(alias);
    return {};
  }
  antlrcpp::Any visitModelMember(ArchParser::ModelMemberContext *ctx) override {
    auto *model = ctx->modelDecl();
    ast::ArchDecl &a = archOf(ctx);
    if (model->name) {
      for (const auto &g : a.graphs)
        if (g->name == model->name->getText())
          diags.error(m.range(model->name),
                      "an arch may have only one model "
                      "named '{}'",
                      g->name);
      a.graphs.push_back(buildModel(model));
    } else if (a.model) {
      diags.error(m.range(model->getStart()),
                  "an arch may have only one model");
    } else {
      a.model = buildModel(model);
    }
    return {};
  }

  antlrcpp::Any visitConfigField(ArchParser::ConfigFieldContext *ctx) override {
    ast::ConfigEntry &e = newConfigEntry(ctx, ast::ConfigEntry::Kind::Field);
    e.name = ctx->name->getText();
    e.nameRange = m.range(ctx->name);
    e.type = buildType(ctx->typeRef());
    if (ctx->value)
      e.value = exprOf(ctx->value);
    for (antlr4::Token *s : ctx->aliases)
      e.aliases.push_back(unescape(s->getText()));
    return {};
  }
  antlrcpp::Any visitConfigLet(ArchParser::ConfigLetContext *ctx) override {
    ast::ConfigEntry &e = newConfigEntry(ctx, ast::ConfigEntry::Kind::Let);
    e.name = ctx->name->getText();
    e.nameRange = m.range(ctx->name);
    if (auto *type = ctx->typeRef())
      e.type = buildType(type);
    e.value = exprOf(ctx->value);
    return {};
  }
  antlrcpp::Any
  visitConfigDirective(ArchParser::ConfigDirectiveContext *ctx) override {
    std::string word = ctx->directive->getText();
    ast::ConfigEntry::Kind kind = ast::ConfigEntry::Kind::Inert;
    if (word == "keep")
      kind = ast::ConfigEntry::Kind::Keep;
    else if (word != "inert")
      diags.error(m.range(ctx->directive),
                  "expected a config entry ('name: type', 'let', 'check', "
                  "'inert' or 'keep'), got '{}'",
                  word);
    ast::ConfigEntry &e = newConfigEntry(ctx, kind);
    e.nameRange = m.range(ctx->directive);
    for (auto *n : ctx->names) {
      antlr4::Token *t = n->value;
      std::string name = t->getType() == ArchParser::STRING
                             ? unescape(t->getText())
                             : t->getText();
      if (kind == ast::ConfigEntry::Kind::Keep &&
          t->getType() == ArchParser::STRING)
        diags.error(m.range(t), "keep names a field, not a key path");
      e.names.push_back(std::move(name));
    }
    return {};
  }
  antlrcpp::Any visitConfigCheck(ArchParser::ConfigCheckContext *ctx) override {
    ast::ConfigEntry &e = newConfigEntry(ctx, ast::ConfigEntry::Kind::Check);
    e.value = exprOf(ctx->cond);
    if (ctx->message)
      e.message = unescape(ctx->message->getText());
    return {};
  }

  //===--------------------------------------------------------------------===//
  // Statements (dispatched)
  //===--------------------------------------------------------------------===//

  std::vector<ast::StmtPtr> buildBlock(ArchParser::BlockContext *ctx) {
    std::vector<ast::StmtPtr> stmts;
    stmts.reserve(ctx->stmts.size());
    for (auto *s : ctx->stmts) {
      s->accept(this);
      if (!stmtResult)
        unexpected(s, "a statement");
      stmts.push_back(std::move(stmtResult));
    }
    return stmts;
  }

  antlrcpp::Any visitAssignStmt(ArchParser::AssignStmtContext *ctx) override {
    std::vector<ast::Target> targets;
    targets.reserve(ctx->targets.size());
    for (antlr4::Token *t : ctx->targets)
      targets.push_back({t->getText(), m.range(t)});
    auto value = exprOf(ctx->value);
    stmtResult = std::make_unique<ast::AssignStmt>(
        m.range(ctx), std::move(targets), std::move(value));
    return {};
  }

  antlrcpp::Any
  visitAugAssignStmt(ArchParser::AugAssignStmtContext *ctx) override {
    const ast::OperatorInfo *op = ops.compound[ctx->op->getType()];
    if (!op)
      throw InternalParseError(
          fmt::format("compound assignment '{}' has no entry in the "
                      "operator table",
                      ctx->op->getText()),
          m.range(ctx->op));
    auto value = exprOf(ctx->value);
    stmtResult = std::make_unique<ast::AugAssignStmt>(
        m.range(ctx), ast::Target{ctx->target->getText(), m.range(ctx->target)},
        op->binary, std::move(value));
    return {};
  }

  antlrcpp::Any visitForStmt(ArchParser::ForStmtContext *ctx) override {
    auto stmt = std::make_unique<ast::ForStmt>(m.range(ctx));
    stmt->var = {ctx->var->getText(), m.range(ctx->var)};
    stmt->lo = exprOf(ctx->lo);
    stmt->hi = exprOf(ctx->hi);
    // `for i in a .. b @ "scope"` parses the scope into the bound.
    if (auto *scoped = dyn_cast<ast::ScopeExpr>(stmt->hi.get())) {
      stmt->scope = scoped->scope;
      stmt->scopeRange = scoped->scopeRange;
      stmt->hi = std::move(scoped->inner);
    }
    stmt->body = buildBlock(ctx->body);
    stmtResult = std::move(stmt);
    return {};
  }

  antlrcpp::Any visitIfStmt(ArchParser::IfStmtContext *ctx) override {
    auto stmt = buildIf(ctx->ifChain());
    stmtResult = std::move(stmt);
    return {};
  }

  std::unique_ptr<ast::IfStmt> buildIf(ArchParser::IfChainContext *ctx) {
    auto stmt = std::make_unique<ast::IfStmt>(m.range(ctx));
    stmt->cond = exprOf(ctx->cond);
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

  antlrcpp::Any visitReturnStmt(ArchParser::ReturnStmtContext *ctx) override {
    std::vector<ast::ExprPtr> values;
    values.reserve(ctx->values.size());
    for (auto *e : ctx->values)
      values.push_back(exprOf(e));
    stmtResult =
        std::make_unique<ast::ReturnStmt>(m.range(ctx), std::move(values));
    return {};
  }

  antlrcpp::Any visitErrorStmt(ArchParser::ErrorStmtContext *ctx) override {
    stmtResult = std::make_unique<ast::ErrorStmt>(
        m.range(ctx), unescape(ctx->message->getText()));
    return {};
  }

  antlrcpp::Any visitCheckStmt(ArchParser::CheckStmtContext *ctx) override {
    std::optional<std::string> msg;
    if (ctx->message)
      msg = unescape(ctx->message->getText());
    auto cond = exprOf(ctx->cond);
    stmtResult =
        std::make_unique<ast::CheckStmt>(m.range(ctx), std::move(cond), msg);
    return {};
  }

  //===--------------------------------------------------------------------===//
  // Expressions: expr, chain, postfix (typed helpers)
  //===--------------------------------------------------------------------===//

  ast::ExprPtr exprOf(ArchParser::ExprContext *ctx) {
    if (!ctx)
      return expr(nullptr); // internal error
    ast::ExprPtr value = chainOf(ctx->value);
    if (!ctx->then)
      return value;
    ast::ExprPtr then = exprOf(ctx->then);
    ast::ExprPtr otherwise = exprOf(ctx->otherwise);
    return std::make_unique<ast::CondExpr>(
        m.range(ctx), std::move(value), std::move(then), std::move(otherwise));
  }

  /// An operator of a chain, as its binaryOp alternative left it.
  struct ChainOp {
    const ast::OperatorInfo *info;
    SourceRange range;
  };

  /// `unary (binaryOp unary)*`: operands and operators alternate among the
  /// children; each child is dispatched and must fill the slot expected at
  /// its position.
  ast::ExprPtr chainOf(ArchParser::ChainContext *ctx) {
    const auto &children = ctx->children;
    if (children.size() == 1)
      return expr(children[0]);
    std::vector<ast::ExprPtr> operands;
    std::vector<ChainOp> chainOps;
    operands.reserve(children.size() / 2 + 1);
    chainOps.reserve(children.size() / 2);
    for (size_t i = 0; i < children.size(); ++i) {
      if (i % 2 == 0) {
        operands.push_back(expr(children[i]));
        continue;
      }
      children[i]->accept(this);
      if (!infixOp)
        unexpected(children[i], "a binary operator");
      chainOps.push_back({infixOp, infixRange});
      infixOp = nullptr;
    }
    if (operands.size() != chainOps.size() + 1)
      unexpected(ctx, "an operand after the last operator");
    return climb(operands, chainOps);
  }

  /// Whether the operator on the stack, `top`, takes its right operand
  /// before `next` does.
  static bool bindsFirst(const ast::OperatorInfo &top,
                         const ast::OperatorInfo &next) {
    return top.precedence > next.precedence ||
           (top.precedence == next.precedence &&
            next.assoc == ast::Assoc::Left);
  }

  /// Operator-precedence reduction keeping operand/operator order.
  ast::ExprPtr climb(std::vector<ast::ExprPtr> &operands,
                     const std::vector<ChainOp> &chainOps) {
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
      if (op->info->kind == ast::OperatorKind::Membership)
        values.push_back(std::make_unique<ast::InExpr>(
            r, std::move(lhs), std::move(rhs), op->info->negated));
      else
        values.push_back(std::make_unique<ast::BinaryExpr>(
            r, op->info->binary, std::move(lhs), std::move(rhs), op->range));
    };
    values.push_back(std::move(operands[0]));
    for (size_t k = 0; k < chainOps.size(); ++k) {
      while (!stack.empty() &&
             bindsFirst(*stack.back()->info, *chainOps[k].info))
        reduce();
      stack.push_back(&chainOps[k]);
      values.push_back(std::move(operands[k + 1]));
    }
    while (!stack.empty())
      reduce();
    return std::move(values.back());
  }

  /// `primary postfixOp*`: each postfixOp child is dispatched with the
  /// expression so far as its operand.
  ast::ExprPtr postfixOf(ArchParser::PostfixContext *ctx) {
    ast::ExprPtr e = expr(ctx->base);
    const auto &children = ctx->children;
    if (children.size() == 1)
      return e;
    SourceLoc begin = m.begin(ctx->getStart());
    for (size_t i = 1; i < children.size(); ++i) {
      postfixBase = std::move(e);
      postfixBegin = begin;
      children[i]->accept(this);
      if (!postfixResult)
        unexpected(children[i], "a postfix operation");
      e = std::move(postfixResult);
    }
    return e;
  }

  antlrcpp::Any visitExpr(ArchParser::ExprContext *ctx) override {
    exprResult = exprOf(ctx);
    return {};
  }
  antlrcpp::Any visitChain(ArchParser::ChainContext *ctx) override {
    exprResult = chainOf(ctx);
    return {};
  }
  antlrcpp::Any visitPostfix(ArchParser::PostfixContext *ctx) override {
    exprResult = postfixOf(ctx);
    return {};
  }

  //===--------------------------------------------------------------------===//
  // Chain operators and unary alternatives (dispatched)
  //===--------------------------------------------------------------------===//

  antlrcpp::Any visitInfixOp(ArchParser::InfixOpContext *ctx) override {
    const ast::OperatorInfo *op = ops.infix[ctx->op->getType()];
    if (!op || op->kind != ast::OperatorKind::Binary)
      throw InternalParseError(
          fmt::format("binary operator '{}' has no entry in the operator "
                      "table",
                      ctx->op->getText()),
          m.range(ctx->op));
    infixOp = op;
    infixRange = m.range(ctx);
    return {};
  }

  antlrcpp::Any
  visitMembershipOp(ArchParser::MembershipOpContext *ctx) override {
    infixOp = ops.membership[ctx->negated != nullptr];
    infixRange = m.range(ctx);
    return {};
  }

  antlrcpp::Any visitPrefixUnary(ArchParser::PrefixUnaryContext *ctx) override {
    const ast::OperatorInfo *op = ops.prefix[ctx->op->getType()];
    if (!op)
      throw InternalParseError(
          fmt::format("prefix operator '{}' has no entry in the operator "
                      "table",
                      ctx->op->getText()),
          m.range(ctx->op));
    auto operand = expr(ctx->operand);
    exprResult = std::make_unique<ast::UnaryExpr>(m.range(ctx), op->unary,
                                                  std::move(operand));
    return {};
  }

  antlrcpp::Any
  visitPostfixUnary(ArchParser::PostfixUnaryContext *ctx) override {
    exprResult = postfixOf(ctx->value);
    return {};
  }

  //===--------------------------------------------------------------------===//
  // Postfix operations (dispatched; operand in postfixBase)
  //===--------------------------------------------------------------------===//

  /// Takes the operand and the range of a postfix operation.
  std::pair<ast::ExprPtr, SourceRange>
  postfixOperand(antlr4::ParserRuleContext *ctx) {
    if (!postfixBase)
      unexpected(ctx, "an expression before the postfix operation");
    return {std::move(postfixBase),
            SourceRange(postfixBegin, m.range(ctx).end)};
  }

  antlrcpp::Any visitMemberOp(ArchParser::MemberOpContext *ctx) override {
    auto [base, r] = postfixOperand(ctx);
    postfixResult = std::make_unique<ast::MemberExpr>(
        r, std::move(base), ctx->member->getText(), m.range(ctx->member));
    return {};
  }

  antlrcpp::Any visitCallOp(ArchParser::CallOpContext *ctx) override {
    // The operand is taken first: building the arguments dispatches other
    // postfix operations.
    auto [callee, r] = postfixOperand(ctx);
    std::vector<ast::Arg> args;
    if (ctx->args) {
      args.reserve(ctx->args->args.size());
      for (auto *a : ctx->args->args) {
        ast::Arg arg;
        if (a->name) {
          arg.name = a->name->getText();
          arg.nameRange = m.range(a->name);
        }
        arg.value = exprOf(a->value);
        args.push_back(std::move(arg));
      }
    }
    postfixResult =
        std::make_unique<ast::CallExpr>(r, std::move(callee), std::move(args));
    return {};
  }

  antlrcpp::Any visitIndexOp(ArchParser::IndexOpContext *ctx) override {
    auto [base, r] = postfixOperand(ctx);
    auto index = exprOf(ctx->index);
    postfixResult =
        std::make_unique<ast::IndexExpr>(r, std::move(base), std::move(index));
    return {};
  }

  antlrcpp::Any visitScopeOp(ArchParser::ScopeOpContext *ctx) override {
    auto [base, r] = postfixOperand(ctx);
    postfixResult = std::make_unique<ast::ScopeExpr>(
        r, std::move(base), unescape(ctx->scope->getText()),
        m.range(ctx->scope));
    return {};
  }

  //===--------------------------------------------------------------------===//
  // Primaries (dispatched)
  //===--------------------------------------------------------------------===//

  antlrcpp::Any visitIntLit(ArchParser::IntLitContext *ctx) override {
    SourceRange r = m.range(ctx);
    exprResult = std::make_unique<ast::IntExpr>(
        r, parseIntLiteral(ctx->value->getText(), r, diags));
    return {};
  }

  antlrcpp::Any visitFloatLit(ArchParser::FloatLitContext *ctx) override {
    SourceRange r = m.range(ctx);
    exprResult = std::make_unique<ast::FloatExpr>(
        r, parseFloatLiteral(ctx->value->getText(), r, diags));
    return {};
  }

  antlrcpp::Any visitStringLit(ArchParser::StringLitContext *ctx) override {
    exprResult = std::make_unique<ast::StringExpr>(
        m.range(ctx), unescape(ctx->value->getText()));
    return {};
  }

  antlrcpp::Any visitBoolLit(ArchParser::BoolLitContext *ctx) override {
    exprResult = std::make_unique<ast::BoolExpr>(
        m.range(ctx), ctx->value->getType() == ArchParser::TRUE);
    return {};
  }

  antlrcpp::Any visitNoneLit(ArchParser::NoneLitContext *ctx) override {
    exprResult = std::make_unique<ast::NoneExpr>(m.range(ctx));
    return {};
  }

  antlrcpp::Any visitNameRef(ArchParser::NameRefContext *ctx) override {
    exprResult =
        std::make_unique<ast::NameExpr>(m.range(ctx), ctx->name->getText());
    return {};
  }

  antlrcpp::Any visitParenExpr(ArchParser::ParenExprContext *ctx) override {
    exprResult = exprOf(ctx->inner);
    return {};
  }

  antlrcpp::Any visitListLit(ArchParser::ListLitContext *ctx) override {
    std::vector<ast::ExprPtr> elems;
    elems.reserve(ctx->elems.size());
    for (auto *e : ctx->elems)
      elems.push_back(exprOf(e));
    exprResult =
        std::make_unique<ast::ListExpr>(m.range(ctx), std::move(elems));
    return {};
  }

  antlrcpp::Any visitFnLit(ArchParser::FnLitContext *ctx) override {
    auto params = buildParams(ctx->paramList());
    auto body = buildBlock(ctx->body);
    exprResult = std::make_unique<ast::FnExpr>(m.range(ctx), std::move(params),
                                               std::move(body));
    return {};
  }

  //===--------------------------------------------------------------------===//
  // Rules that are read directly and tokens: never dispatched
  //===--------------------------------------------------------------------===//

#define ARCHC_NOT_DISPATCHED(Rule)                                             \
  antlrcpp::Any visit##Rule(ArchParser::Rule##Context *ctx) override {         \
    return notDispatched(ctx);                                                 \
  }
  ARCHC_NOT_DISPATCHED(File)
  ARCHC_NOT_DISPATCHED(ImportDecl)
  ARCHC_NOT_DISPATCHED(ArchDecl)
  ARCHC_NOT_DISPATCHED(ConfigBlock)
  ARCHC_NOT_DISPATCHED(ConfigName)
  ARCHC_NOT_DISPATCHED(TypeRef)
  ARCHC_NOT_DISPATCHED(DefDecl)
  ARCHC_NOT_DISPATCHED(ParamList)
  ARCHC_NOT_DISPATCHED(Param)
  ARCHC_NOT_DISPATCHED(UseDecl)
  ARCHC_NOT_DISPATCHED(ModelDecl)
  ARCHC_NOT_DISPATCHED(InputList)
  ARCHC_NOT_DISPATCHED(ModelInput)
  ARCHC_NOT_DISPATCHED(Block)
  ARCHC_NOT_DISPATCHED(IfChain)
  ARCHC_NOT_DISPATCHED(ArgList)
  ARCHC_NOT_DISPATCHED(Arg)
#undef ARCHC_NOT_DISPATCHED
  antlrcpp::Any visitTerminal(antlr4::tree::TerminalNode *node) override {
    unexpected(node, "a rule");
  }
  antlrcpp::Any visitErrorNode(antlr4::tree::ErrorNode *node) override {
    unexpected(node, "a rule");
  }
};

} // namespace

std::unique_ptr<ast::File> buildAst(ArchParser::FileContext *tree,
                                    const ArchParser &parser,
                                    const TokenLocations &locations,
                                    DiagnosticEngine &diags) {
  AstBuilder builder(parser, locations, diags);
  return builder.buildFile(tree);
}

ast::ExprPtr buildExpression(antlr4::tree::ParseTree *node,
                             const ArchParser &parser,
                             const TokenLocations &locations,
                             DiagnosticEngine &diags) {
  AstBuilder builder(parser, locations, diags);
  return builder.expr(node);
}

} // namespace archc::frontend
