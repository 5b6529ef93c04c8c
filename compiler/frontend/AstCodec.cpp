//===- AstCodec.cpp - The AST of one file as bytes ------------------------===//
//
// This file implements encodeFile() and decodeFile(). The encoding is a
// pre-order walk: unsigned numbers are LEB128 varints, signed integers are
// zigzag varints, doubles are their eight IEEE bytes (little-endian),
// strings and lists are a count then their elements, an optional node is a
// tag (0 = absent; for expressions and statements 1 + the kind). A location
// is a varint (line << 1 | has-file) and a varint column.
//
// Every element of a list takes at least one byte, so a count larger than
// the bytes left is rejected before anything is allocated: a corrupt
// encoding cannot make the decoder allocate more than a small multiple of
// its size.
//
//===----------------------------------------------------------------------===//
#include "frontend/AstCodec.h"

#include "support/ContentHash.h"

#include <bit>
#include <limits>

namespace archc::ast {

namespace {

//===----------------------------------------------------------------------===//
// Layout fingerprint
//===----------------------------------------------------------------------===//

// Every node type the encoding covers, with its size under libstdc++ on
// x86-64.
#define ARCHC_AST_NODE_TYPES(X)                                                \
  X(TypeRef, 72)                                                               \
  X(IntExpr, 48)                                                               \
  X(FloatExpr, 48)                                                             \
  X(StringExpr, 72)                                                            \
  X(BoolExpr, 40)                                                              \
  X(NoneExpr, 40)                                                              \
  X(NameExpr, 72)                                                              \
  X(ListExpr, 64)                                                              \
  X(MemberExpr, 104)                                                           \
  X(Arg, 64)                                                                   \
  X(CallExpr, 72)                                                              \
  X(IndexExpr, 56)                                                             \
  X(ScopeExpr, 104)                                                            \
  X(UnaryExpr, 48)                                                             \
  X(BinaryExpr, 80)                                                            \
  X(InExpr, 64)                                                                \
  X(CondExpr, 64)                                                              \
  X(Param, 72)                                                                 \
  X(FnExpr, 88)                                                                \
  X(Target, 56)                                                                \
  X(AssignStmt, 72)                                                            \
  X(AugAssignStmt, 112)                                                        \
  X(ForStmt, 200)                                                              \
  X(IfStmt, 104)                                                               \
  X(ReturnStmt, 64)                                                            \
  X(ErrorStmt, 72)                                                             \
  X(CheckStmt, 88)                                                             \
  X(ConfigEntry, 168)                                                          \
  X(DefDecl, 136)                                                              \
  X(ModelInput, 136)                                                           \
  X(ModelDecl, 152)                                                            \
  X(UseDecl, 136)                                                              \
  X(ArchDecl, 368)                                                             \
  X(ImportDecl, 56)                                                            \
  X(File, 80)

constexpr size_t kNodeSizes[] = {
#define ARCHC_NODE_SIZE(T, N) sizeof(T),
    ARCHC_AST_NODE_TYPES(ARCHC_NODE_SIZE)
#undef ARCHC_NODE_SIZE
};

#if defined(__GLIBCXX__) && defined(__x86_64__)
// A reminder at compile time where the sizes are known: a node whose size
// changed has probably gained or lost a field, which encodeFile/decodeFile
// and the AST dump of the unit tests (tests/unit/AstDump.h) must handle;
// then bump kCodecVersion and the size above. Elsewhere the fingerprint
// alone keeps a snapshot of another AST layout from being read.
#define ARCHC_CHECK_NODE_SIZE(T, N)                                            \
  static_assert(sizeof(T) == N,                                                \
                "ast::" #T " changed: update frontend/AstCodec.cpp and "       \
                "tests/unit/AstDump.h");
ARCHC_AST_NODE_TYPES(ARCHC_CHECK_NODE_SIZE)
#undef ARCHC_CHECK_NODE_SIZE
#endif

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
    c.kind = enumValue(ConfigEntry::Kind::Check);
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

uint32_t astLayoutFingerprint() {
  uint64_t words[std::size(kNodeSizes)];
  for (size_t i = 0; i < std::size(kNodeSizes); ++i)
    words[i] = kNodeSizes[i];
  uint64_t h = contentHash(
      std::string_view(reinterpret_cast<const char *>(words), sizeof(words)));
  return static_cast<uint32_t>(h ^ (h >> 32));
}

bool encodeFile(const File &file, std::string &out) {
  std::string bytes;
  Encoder e(bytes, file.fileId);
  e.file(file);
  if (!e.ok)
    return false;
  out += bytes;
  return true;
}

std::unique_ptr<File> decodeFile(std::string_view bytes, uint32_t fileId) {
  Decoder d(bytes, fileId);
  return d.file();
}

} // namespace archc::ast
