//===- AstDecoder.cpp - An ast::File from its bytes, trusting nothing -----===//
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
// Decoder
//===----------------------------------------------------------------------===//

class Decoder {
public:
  Decoder(std::string_view bytes, uint32_t fileId)
      : p(reinterpret_cast<const unsigned char *>(bytes.data())),
        end(p + bytes.size()), fileId(fileId),
        reserveBudget(32 * bytes.size()) {}
  bool ok = true;

  std::unique_ptr<File> file() {
    auto f = std::make_unique<File>();
    f->fileId = fileId;
    size_t n = count();
    reserve(f->imports, n);
    for (size_t i = 0; i < n && ok; ++i) {
      ImportDecl imp;
      imp.range = range();
      imp.path = str();
      f->imports.push_back(std::move(imp));
    }
    n = count();
    reserve(f->defs, n);
    for (size_t i = 0; i < n && ok; ++i)
      f->defs.push_back(def());
    n = count();
    reserve(f->archs, n);
    for (size_t i = 0; i < n && ok; ++i)
      f->archs.push_back(arch());
    if (!ok || p != end)
      return nullptr;
    return f;
  }

private:
  const unsigned char *p, *end;
  uint32_t fileId;
  unsigned depth = 0;

  /// Counts one level of nesting for the duration of a node.
  struct Nested {
    Decoder &d;
    explicit Nested(Decoder &d) : d(d) {
      if (++d.depth > kMaxCodecDepth)
        d.fail();
    }
    ~Nested() { --d.depth; }
  };

  /// Bytes that reserve() may still allocate: 32 times the encoding's size.
  /// No list element is larger than 32 times its shortest encoding, so the
  /// lists of a valid encoding stay within it, and corrupt counts cannot
  /// make the decoder reserve more.
  size_t reserveBudget;

  size_t left() const { return static_cast<size_t>(end - p); }
  /// Reserves room for `n` elements of `v` while the budget lasts (beyond
  /// it, the vector grows as elements are decoded).
  template <typename T> void reserve(std::vector<T> &v, size_t n) {
    if (n * sizeof(T) > reserveBudget)
      return;
    reserveBudget -= n * sizeof(T);
    v.reserve(n);
  }
  bool fail() {
    ok = false;
    p = end; // every later read fails at once
    return false;
  }

  uint64_t varint() {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      if (p == end) {
        fail();
        return 0;
      }
      unsigned char b = *p++;
      if (shift == 63 && b > 1) {
        fail(); // more than 64 bits
        return 0;
      }
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80))
        return v;
    }
    fail();
    return 0;
  }
  /// A count of elements that each take at least one byte.
  size_t count() {
    uint64_t n = varint();
    if (n > left()) {
      fail();
      return 0;
    }
    return static_cast<size_t>(n);
  }
  /// A value of an enum whose last enumerator is `last`.
  template <typename E> E enumValue(E last) {
    uint64_t v = varint();
    if (v > static_cast<uint64_t>(last))
      fail();
    return ok ? static_cast<E>(v) : E{};
  }
  bool flag() {
    if (p == end || *p > 1) {
      fail();
      return false;
    }
    return *p++ != 0;
  }
  int64_t sint() {
    uint64_t u = varint();
    return static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
  }
  double real() {
    if (left() < 8) {
      fail();
      return 0;
    }
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i)
      bits |= uint64_t(p[i]) << (8 * i);
    p += 8;
    return std::bit_cast<double>(bits);
  }
  std::string str() {
    size_t n = count();
    std::string s(reinterpret_cast<const char *>(p), n);
    p += n;
    return s;
  }
  std::optional<std::string> optStr() {
    if (!flag())
      return std::nullopt;
    return str();
  }
  SourceLoc loc() {
    uint64_t lineAndFile = varint();
    uint64_t col = varint();
    constexpr uint64_t kMax = std::numeric_limits<uint32_t>::max();
    if ((lineAndFile >> 1) > kMax || col > kMax) {
      fail();
      return {};
    }
    return SourceLoc{(lineAndFile & 1) ? fileId : 0,
                     static_cast<uint32_t>(lineAndFile >> 1),
                     static_cast<uint32_t>(col)};
  }
  SourceRange range() {
    SourceLoc b = loc();
    SourceLoc e = loc();
    return SourceRange(b, e);
  }
  Target target() {
    Target t;
    t.name = str();
    t.range = range();
    return t;
  }

  std::unique_ptr<TypeRef> type() {
    Nested n(*this);
    if (!ok || !flag())
      return nullptr;
    auto t = std::make_unique<TypeRef>();
    t->range = range();
    t->name = str();
    t->optional = flag();
    t->elem = type();
    return t;
  }

  std::vector<Param> params() {
    std::vector<Param> ps;
    size_t n = count();
    reserve(ps, n);
    for (size_t i = 0; i < n && ok; ++i) {
      Param p;
      p.range = range();
      p.name = str();
      p.type = type();
      p.defaultValue = expr();
      ps.push_back(std::move(p));
    }
    return ps;
  }

  std::vector<ExprPtr> exprs() {
    std::vector<ExprPtr> es;
    size_t n = count();
    reserve(es, n);
    for (size_t i = 0; i < n && ok; ++i)
      es.push_back(expr());
    return es;
  }

  ExprPtr expr() {
    Nested n(*this);
    if (!ok)
      return nullptr;
    uint64_t tag = varint();
    if (tag == 0)
      return nullptr;
    if (tag - 1 > static_cast<uint64_t>(Expr::Kind::Fn)) {
      fail();
      return nullptr;
    }
    auto kind = static_cast<Expr::Kind>(tag - 1);
    SourceRange r = range();
    switch (kind) {
    case Expr::Kind::Int:
      return std::make_unique<IntExpr>(r, sint());
    case Expr::Kind::Float:
      return std::make_unique<FloatExpr>(r, real());
    case Expr::Kind::String:
      return std::make_unique<StringExpr>(r, str());
    case Expr::Kind::Bool:
      return std::make_unique<BoolExpr>(r, flag());
    case Expr::Kind::None:
      return std::make_unique<NoneExpr>(r);
    case Expr::Kind::Name:
      return std::make_unique<NameExpr>(r, str());
    case Expr::Kind::List:
      return std::make_unique<ListExpr>(r, exprs());
    case Expr::Kind::Member: {
      ExprPtr base = expr();
      std::string member = str();
      SourceRange mr = range();
      return std::make_unique<MemberExpr>(r, std::move(base), std::move(member),
                                          mr);
    }
    case Expr::Kind::Call: {
      ExprPtr callee = expr();
      std::vector<Arg> args;
      size_t na = count();
      reserve(args, na);
      for (size_t i = 0; i < na && ok; ++i) {
        Arg a;
        a.name = str();
        a.nameRange = range();
        a.value = expr();
        args.push_back(std::move(a));
      }
      return std::make_unique<CallExpr>(r, std::move(callee), std::move(args));
    }
    case Expr::Kind::Index: {
      ExprPtr base = expr();
      ExprPtr index = expr();
      return std::make_unique<IndexExpr>(r, std::move(base), std::move(index));
    }
    case Expr::Kind::Scope: {
      ExprPtr inner = expr();
      std::string scope = str();
      SourceRange sr = range();
      return std::make_unique<ScopeExpr>(r, std::move(inner), std::move(scope),
                                         sr);
    }
    case Expr::Kind::Unary: {
      UnaryOp op = enumValue(UnaryOp::Not);
      ExprPtr operand = expr();
      return std::make_unique<UnaryExpr>(r, op, std::move(operand));
    }
    case Expr::Kind::Binary: {
      BinaryOp op = enumValue(BinaryOp::Or);
      ExprPtr lhs = expr();
      ExprPtr rhs = expr();
      SourceRange opr = range();
      return std::make_unique<BinaryExpr>(r, op, std::move(lhs), std::move(rhs),
                                          opr);
    }
    case Expr::Kind::In: {
      ExprPtr lhs = expr();
      ExprPtr rhs = expr();
      bool negated = flag();
      return std::make_unique<InExpr>(r, std::move(lhs), std::move(rhs),
                                      negated);
    }
    case Expr::Kind::Cond: {
      ExprPtr cond = expr();
      ExprPtr then = expr();
      ExprPtr otherwise = expr();
      return std::make_unique<CondExpr>(r, std::move(cond), std::move(then),
                                        std::move(otherwise));
    }
    case Expr::Kind::Fn: {
      std::vector<Param> ps = params();
      std::vector<StmtPtr> body = stmts();
      return std::make_unique<FnExpr>(r, std::move(ps), std::move(body));
    }
    }
    fail();
    return nullptr;
  }

  std::vector<StmtPtr> stmts() {
    std::vector<StmtPtr> ss;
    size_t n = count();
    reserve(ss, n);
    for (size_t i = 0; i < n && ok; ++i)
      ss.push_back(stmt());
    return ss;
  }

  StmtPtr stmt() {
    Nested n(*this);
    if (!ok)
      return nullptr;
    uint64_t tag = varint();
    if (tag == 0)
      return nullptr;
    if (tag - 1 > static_cast<uint64_t>(Stmt::Kind::Check)) {
      fail();
      return nullptr;
    }
    auto kind = static_cast<Stmt::Kind>(tag - 1);
    SourceRange r = range();
    switch (kind) {
    case Stmt::Kind::Assign: {
      std::vector<Target> targets;
      size_t nt = count();
      reserve(targets, nt);
      for (size_t i = 0; i < nt && ok; ++i)
        targets.push_back(target());
      ExprPtr value = expr();
      return std::make_unique<AssignStmt>(r, std::move(targets),
                                          std::move(value));
    }
    case Stmt::Kind::AugAssign: {
      Target t = target();
      BinaryOp op = enumValue(BinaryOp::Or);
      ExprPtr value = expr();
      return std::make_unique<AugAssignStmt>(r, std::move(t), op,
                                             std::move(value));
    }
    case Stmt::Kind::For: {
      auto f = std::make_unique<ForStmt>(r);
      f->var = target();
      f->lo = expr();
      f->hi = expr();
      f->scope = optStr();
      f->scopeRange = range();
      f->body = stmts();
      return f;
    }
    case Stmt::Kind::If: {
      auto i = std::make_unique<IfStmt>(r);
      i->cond = expr();
      i->then = stmts();
      i->otherwise = stmts();
      i->hasElse = flag();
      return i;
    }
    case Stmt::Kind::Return:
      return std::make_unique<ReturnStmt>(r, exprs());
    case Stmt::Kind::Error:
      return std::make_unique<ErrorStmt>(r, str());
    case Stmt::Kind::Check: {
      ExprPtr cond = expr();
      std::optional<std::string> message = optStr();
      return std::make_unique<CheckStmt>(r, std::move(cond),
                                         std::move(message));
    }
    }
    fail();
    return nullptr;
  }

  std::unique_ptr<DefDecl> def() {
    auto d = std::make_unique<DefDecl>();
    d->fileId = fileId;
    d->range = range();
    d->name = str();
    d->nameRange = range();
    d->params = params();
    d->body = stmts();
    return d;
  }

  ConfigEntry config() {
    ConfigEntry c;
    c.kind = enumValue(ConfigEntry::Kind::Keep);
    c.range = range();
    c.name = str();
    c.nameRange = range();
    c.type = type();
    c.value = expr();
    size_t n = count();
    reserve(c.aliases, n);
    for (size_t i = 0; i < n && ok; ++i)
      c.aliases.push_back(str());
    c.message = optStr();
    n = count();
    reserve(c.names, n);
    for (size_t i = 0; i < n && ok; ++i)
      c.names.push_back(str());
    return c;
  }

  std::unique_ptr<ModelDecl> model() {
    if (!flag())
      return nullptr;
    auto m = std::make_unique<ModelDecl>();
    m->range = range();
    m->name = str();
    m->nameRange = range();
    size_t n = count();
    reserve(m->inputs, n);
    for (size_t i = 0; i < n && ok; ++i) {
      ModelInput in;
      in.range = range();
      in.name = str();
      in.dtype = str();
      in.dtypeRange = range();
      in.dims = exprs();
      m->inputs.push_back(std::move(in));
    }
    n = count();
    reserve(m->outputs, n);
    for (size_t i = 0; i < n && ok; ++i)
      m->outputs.push_back(target());
    m->body = stmts();
    return m;
  }

  std::unique_ptr<ArchDecl> arch() {
    auto a = std::make_unique<ArchDecl>();
    a->range = range();
    a->name = str();
    a->nameRange = range();
    a->base = str();
    a->baseRange = range();
    size_t n = count();
    reserve(a->matches, n);
    for (size_t i = 0; i < n && ok; ++i)
      a->matches.push_back(str());
    n = count();
    reserve(a->modelTypes, n);
    for (size_t i = 0; i < n && ok; ++i)
      a->modelTypes.push_back(str());
    a->modelTypesRange = range();
    n = count();
    reserve(a->config, n);
    for (size_t i = 0; i < n && ok; ++i)
      a->config.push_back(config());
    n = count();
    reserve(a->uses, n);
    for (size_t i = 0; i < n && ok; ++i) {
      UseDecl u;
      u.range = range();
      u.arch = str();
      u.archRange = range();
      u.alias = str();
      u.aliasRange = range();
      a->uses.push_back(std::move(u));
    }
    n = count();
    reserve(a->defs, n);
    for (size_t i = 0; i < n && ok; ++i)
      a->defs.push_back(def());
    a->model = model();
    n = count();
    reserve(a->graphs, n);
    for (size_t i = 0; i < n && ok; ++i) {
      // Each named graph is present (the flag of an absent one is corrupt).
      std::unique_ptr<ModelDecl> g = model();
      if (!g || g->name.empty()) {
        fail();
        break;
      }
      a->graphs.push_back(std::move(g));
    }
    return a;
  }
};

} // namespace

std::unique_ptr<File> decodeFile(std::string_view bytes, uint32_t fileId) {
  Decoder d(bytes, fileId);
  return d.file();
}

} // namespace archc::ast
