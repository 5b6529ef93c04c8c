//===- Evaluator.h - Compile-time evaluation of .arch code ------*- C++ -*-===//
//
// This file declares the Evaluator, which runs .arch code at compile time
// with the bound config and builds the IR as a side effect (IR generation).
// Scalars, lists and dicts are folded; tensor expressions become IR ops;
// composites (`def`) are inlined, each op remembering the chain of calls it
// came through. Layer loops are evaluated once per layer and grouped into
// layer kinds (identical bodies), which become the regions of one `repeat`
// op, so repetition stays compact in the IR.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IRGEN_EVALUATOR_H
#define ARCHC_IRGEN_EVALUATOR_H

#include "frontend/Builtins.h"
#include "frontend/Program.h"
#include "ir/OpSchema.h"
#include "irgen/EvalValue.h"

#include <map>
#include <set>

namespace archc {

class Evaluator {
public:
  Evaluator(const Program &program, DiagnosticEngine &diags,
            ir::Module &module);

  /// Evaluates an expression in `env`. Errors are reported and yield poison.
  EvalValue eval(const ast::Expr &e, const std::shared_ptr<Env> &env);
  /// Evaluates a condition that must be a compile-time bool; reports (as
  /// "<what> must be a compile-time bool") and returns nullopt otherwise.
  std::optional<bool> evalCondition(const ast::Expr &e,
                                    const std::shared_ptr<Env> &env,
                                    const char *what);

  /// Bounds on what a config may ask for (docs/limits.md): weight tensors
  /// in a model, parameters in a model, routed experts of one op, expert
  /// bodies of a model (experts x layers: the ONNX lowering writes each).
  static constexpr int64_t kMaxTensors = int64_t(1) << 20;
  static constexpr int64_t kMaxParams = int64_t(1) << 50;
  static constexpr int64_t kMaxExperts = int64_t(1) << 12;
  static constexpr int64_t kMaxExpertInstances = int64_t(1) << 17;

  /// Builds the module's graph from the arch's model (`model`, or the main
  /// one when null). `configEnv` holds the bound config values. Returns
  /// false when errors were reported.
  bool buildModel(const ast::ArchDecl &arch, std::shared_ptr<Env> configEnv,
                  const ast::ModelDecl *model = nullptr);

  /// The value of a `use` alias: a dict of the used arch's config values
  /// (`config`, bound to the same config.json) and of its defs, which run in
  /// that arch's scope.
  static EvalValue archNamespace(const ast::ArchDecl &arch,
                                 std::shared_ptr<Env> config);

  /// Checks a value against a declared type, converting int to float where
  /// a float is expected. Returns false when it does not fit.
  static bool coerce(EvalValue &v, const ast::TypeRef &type);

  /// Converts a compile-time value to an IR attribute; false if it has no
  /// attribute form (tensors, functions).
  static bool toAttr(const EvalValue &v, ir::Attr &out);

  /// Interpolates `{name}` placeholders from `env`. Layer and expert index
  /// variables without a value become `{i}` / `{e}`.
  std::string interpolate(const std::string &text, SourceRange range,
                          const std::shared_ptr<Env> &env, bool keepIndices);

  /// Counters of layer-loop evaluation (over all layer loops evaluated so
  /// far): how many layer bodies were evaluated, and how many layers reused
  /// the body of an earlier layer with the same layer key instead.
  struct Stats {
    int64_t layerBodiesEvaluated = 0;
    int64_t layerBodiesReused = 0;
  };
  const Stats &getStats() const { return stats; }

private:
  enum class Flow { Normal, Return, Abort };

  Stats stats;

  const Program &program;
  DiagnosticEngine &diags;
  ir::Module &module;
  const ast::ArchDecl *arch = nullptr;
  /// The defs and config of the arch whose code runs (the compiled arch, or
  /// a used one inside its defs).
  std::shared_ptr<const ArchScope> current = std::make_shared<ArchScope>();

  // IR construction state.
  ir::Block *block = nullptr;
  std::vector<std::string> scopes;
  /// Scope of `call(...) @ "s"`: applied to the callee, after the arguments
  /// are evaluated in the caller's scope.
  std::optional<std::string> pendingCallScope;
  std::optional<int64_t> layer;
  int64_t expertCount = 0;
  std::shared_ptr<const ir::InlineFrame> frame;
  unsigned callDepth = 0;
  EvalValue returnValue;

  // Weight registry: pattern -> declarations (one per distinct type).
  std::map<std::string, std::vector<size_t>> weightIndex;
  // (pattern, layer) pairs declared so far, to catch duplicates.
  std::map<std::pair<std::string, int64_t>, SourceRange> declared;

  // Statements.
  Flow exec(const std::vector<ast::StmtPtr> &body,
            const std::shared_ptr<Env> &env);
  Flow execStmt(const ast::Stmt &s, const std::shared_ptr<Env> &env);
  Flow execFor(const ast::ForStmt &s, const std::shared_ptr<Env> &env);

  // Expressions.
  EvalValue evalName(const ast::NameExpr &e, const std::shared_ptr<Env> &env);
  EvalValue evalMember(const ast::MemberExpr &e,
                       const std::shared_ptr<Env> &env);
  EvalValue evalIndex(const ast::IndexExpr &e, const std::shared_ptr<Env> &env);
  /// `w[e]` inside an expert body: expert e's slice of a stacked weight.
  EvalValue stackedExpertSlice(ir::Value *stacked, SourceRange range);
  EvalValue evalUnary(const ast::UnaryExpr &e, const std::shared_ptr<Env> &env);
  EvalValue evalBinary(const ast::BinaryExpr &e,
                       const std::shared_ptr<Env> &env);
  EvalValue evalCall(const ast::CallExpr &e, const std::shared_ptr<Env> &env);
  EvalValue evalScope(const ast::ScopeExpr &e, const std::shared_ptr<Env> &env);
  EvalValue arith(ast::BinaryOp op, const EvalValue &a, const EvalValue &b,
                  SourceRange range);
  /// `op` on symbolic dims (throws std::overflow_error on overflow).
  EvalValue dimArith(ast::BinaryOp op, const ir::SymExpr &x,
                     const ir::SymExpr &y, SourceRange range);

  // Calls.
  /// An evaluated call argument; `name` points into the AST (empty when
  /// positional).
  struct CallArg {
    std::string_view name;
    EvalValue value;
  };
  struct BoundArg {
    EvalValue value;
    SourceRange range;
    bool present = false;
  };
  bool bindArgs(const std::string &callee,
                const std::vector<std::string_view> &paramNames,
                const std::vector<bool> &required,
                const std::vector<CallArg> &args,
                const std::vector<SourceRange> &argRanges,
                SourceRange callRange, std::vector<BoundArg> &out);
  EvalValue callFunction(const Callable &fn, const std::vector<CallArg> &args,
                         const std::vector<SourceRange> &argRanges,
                         SourceRange callRange,
                         const std::vector<EvalValue> *extraLeading = nullptr);
  EvalValue callOpBuiltin(const BuiltinSignature &sig,
                          std::vector<BoundArg> &args, SourceRange callRange);
  EvalValue callFunctionBuiltin(const BuiltinSignature &sig,
                                std::vector<BoundArg> &args,
                                SourceRange callRange);
  bool checkBuiltinArg(const BuiltinSignature &sig, const BuiltinParam &p,
                       BoundArg &a);

  // IR helpers.
  ir::Op *createOp(ir::OpKind kind, std::vector<ir::Value *> operands,
                   SourceRange range, unsigned numResults = 1);
  ir::Value *asTensor(const EvalValue &v, SourceRange range);
  ir::Value *constant(double value, SourceRange range);
  EvalValue declareParam(const std::string &name,
                         const std::vector<EvalValue> &shape, ir::DType dtype,
                         SourceRange range, bool pinnedDType = false,
                         bool buffer = false);
  /// Converts an `op.*` argument to its schema attribute type; reports at
  /// the argument and returns nullopt when it does not convert.
  std::optional<ir::Attr> toTypedAttr(const ir::OpSchema &s,
                                      const ir::AttrSpec &spec,
                                      const BoundArg &a);
  /// Builds an op's region from a function argument (expert bodies).
  /// The weight tensor, parameter and expert-body counts are within
  /// kMaxTensors, kMaxParams and kMaxExpertInstances; otherwise an error at
  /// the declaration that crosses one (the arch for expert bodies).
  bool checkModelSize();
  bool buildRegion(const ir::OpSchema &s, ir::Op &op, const Callable &fn,
                   SourceRange fnRange, SourceRange range);
  std::string currentScope() const;

  Diagnostic &error(SourceRange r, const std::string &msg);
};

} // namespace archc

#endif // ARCHC_IRGEN_EVALUATOR_H
