//===- EvalLayerLoop.cpp - Layer loops with one body per layer kind -------===//
#include "frontend/AstQueries.h"
#include "ir/BlockEquality.h"
#include "irgen/Evaluator.h"
#include "irgen/LayerKeys.h"
#include "support/CheckedArith.h"

#include <fmt/format.h>

namespace archc {

using ir::OpKind;

namespace {
// 32x the deepest released model (126 layers): the ONNX back end writes
// every layer's nodes, which for 100,000 tiny layers took > 5 min and 2.6 GB.
constexpr int64_t kMaxLayers = 4096;
} // namespace

Evaluator::Flow Evaluator::execFor(const ast::ForStmt &s,
                                   const std::shared_ptr<Env> &env) {
  EvalValue lo = eval(*s.lo, env), hi = eval(*s.hi, env);
  if (lo.isPoison() || hi.isPoison())
    return Flow::Normal;
  if (!lo.isInt() || !hi.isInt()) {
    error(!lo.isInt() ? s.lo->getRange() : s.hi->getRange(),
          fmt::format("layer loop bounds must be ints, got {}",
                      !lo.isInt() ? lo.typeName() : hi.typeName()));
    return Flow::Normal;
  }
  if (layer || expertCount) {
    error(s.getRange(), "layer loops cannot be nested in a layer loop or an "
                        "expert body");
    return Flow::Normal;
  }
  int64_t begin = lo.getInt(), end = hi.getInt();
  // The count is checked before anything iterates: a difference that does
  // not fit in int64 is over the limit too.
  std::optional<int64_t> iterations = checkedSub(end, begin);
  if (!iterations || *iterations > kMaxLayers) {
    error(s.hi->getRange(),
          fmt::format("layer loop {} .. {} exceeds the limit of {} "
                      "iterations",
                      begin, end, kMaxLayers));
    return Flow::Normal;
  }
  // A count that comes out negative is a wrong config (num_hidden_layers
  // = -1), not an empty model.
  if (begin < 0 || *iterations < 0) {
    error(begin < 0 ? s.lo->getRange() : s.hi->getRange(),
          fmt::format("layer loop {} .. {} has a negative {}", begin, end,
                      begin < 0 ? "start" : "number of iterations"));
    return Flow::Normal;
  }
  if (end == begin)
    return Flow::Normal;

  // Loop-carried values: names assigned in the body that exist before it.
  std::vector<std::string> assigned;
  ast::collectAssignedNames(s.body, assigned);
  std::vector<std::string> carried;
  std::vector<ir::Value *> inits;
  for (const std::string &n : assigned) {
    EvalValue *v = env->lookup(n);
    if (!v || n == s.var.name)
      continue;
    if (v->isPoison())
      return Flow::Normal;
    if (!v->isTensor()) {
      error(s.getRange(),
            fmt::format("'{}' is a {} assigned inside the layer loop; only "
                        "tensors can be carried from layer to layer",
                        n, v->typeName()));
      return Flow::Normal;
    }
    carried.push_back(n);
    inits.push_back(v->getTensor());
  }

  struct Kind {
    std::unique_ptr<ir::Block> block;
    std::vector<int64_t> layers;
  };
  std::vector<Kind> kinds;
  ir::Block *savedBlock = block;
  Flow result = Flow::Normal;
  // Layer keys: the values of the pure expressions through which the loop
  // variable enters the body (LayerKeyCollector), each evaluated
  // speculatively for every layer. Layers with equal key tuples evaluate to
  // identical bodies, so each distinct tuple is evaluated once (a body that
  // never reads the variable has the empty key: one evaluation for all
  // layers).
  //
  // A key may fail to evaluate (poison): `layer_types[i]` when there is no
  // layer_types, `compress_ratios[i] == 4` on a config that gives
  // layer_types instead - the natural `if / else if` chain over optional
  // config fields. A failure is one more key value, equal only to a
  // failure, and that is sound:
  // - A key reads only the loop variable and names the body never assigns,
  //   and calls only pure functions (whose results depend on their
  //   arguments and on closures that are the same for every layer), so its
  //   speculative value is the value it has wherever the body evaluates it,
  //   a failure included (diagnostics never feed back into values).
  // - Every use of the variable in the body lies inside a key, and the
  //   evaluation is deterministic in the values it reads. Branch
  //   conditions are no exception: a condition that mentions the variable
  //   is a key or is built from keys, one that does not is the same on
  //   every layer. So two layers with equal key tuples take the same
  //   branches and compute the same values at every step: identical bodies.
  // - A failed key that the body does evaluate fails there too and reports
  //   its error; the loop then stops and nothing is memoised. A memoised
  //   failure is therefore a key in a branch the layer did not take, and an
  //   equal tuple makes the other layer skip it as well.
  // Tensor-valued keys (arithmetic with a tensor from outside the loop) are
  // not comparable across layers: such a layer is evaluated, not reused.
  // Names resolve in the arch whose code runs the loop (a used arch's own
  // defs and config inside its defs).
  LayerKeys keyExprs =
      findLayerKeys(s.var.name, s.body, program.getDefs(), current, env);
  struct Memo {
    std::vector<EvalValue> key;
    size_t kind;
    std::vector<size_t> weightDecls; ///< {i} declarations of that layer
  };
  std::vector<Memo> memos;
  auto sameKeyValue = [](const EvalValue &a, const EvalValue &b) {
    if (a.isPoison() || b.isPoison())
      return a.isPoison() && b.isPoison();
    return a.equals(b);
  };
  for (int64_t l = begin; l < end; ++l) {
    // Compute this layer's key speculatively: no diagnostics kept, and any
    // op a key creates goes to a scratch block that is dropped.
    std::vector<EvalValue> key;
    bool keyed = keyExprs.ok;
    if (keyed) {
      auto probeEnv = std::make_shared<Env>(env);
      probeEnv->define(s.var.name, EvalValue::index("i", l));
      DiagnosticEngine::Checkpoint cp = diags.save();
      ir::Block scratch;
      block = &scratch;
      for (const ast::Expr *k : keyExprs.keys) {
        EvalValue v = eval(*k, probeEnv);
        if (v.isTensor()) {
          keyed = false;
          break;
        }
        key.push_back(std::move(v));
      }
      block = savedBlock;
      diags.restore(cp);
    }
    if (keyed) {
      const Memo *hit = nullptr;
      for (const Memo &m : memos) {
        bool same = m.key.size() == key.size();
        for (size_t k = 0; same && k < key.size(); ++k)
          same = sameKeyValue(m.key[k], key[k]);
        if (same) {
          hit = &m;
          break;
        }
      }
      if (hit) {
        kinds[hit->kind].layers.push_back(l);
        for (size_t w : hit->weightDecls) {
          module.weights[w].layers.push_back(l);
          declared.emplace(std::make_pair(module.weights[w].pattern, l),
                           module.weights[w].loc);
        }
        ++stats.layerBodiesReused;
        continue;
      }
    }
    ++stats.layerBodiesEvaluated;
    std::vector<size_t> layersBefore;
    for (const ir::WeightDecl &w : module.weights)
      layersBefore.push_back(w.layers.size());
    auto body = std::make_unique<ir::Block>();
    auto inner = std::make_shared<Env>(env);
    inner->define(s.var.name, EvalValue::index("i", l));
    for (size_t k = 0; k < carried.size(); ++k)
      inner->define(carried[k], EvalValue::tensor(body->addArgument(
                                    ir::TensorType::unknown(), carried[k])));
    block = body.get();
    layer = l;
    size_t scopeDepth = scopes.size();
    if (s.scope)
      scopes.push_back(interpolate(*s.scope, s.scopeRange, inner, true));
    unsigned errorsBefore = diags.getNumErrors();
    Flow f = exec(s.body, inner);
    scopes.resize(scopeDepth);
    std::vector<ir::Value *> yields;
    for (const std::string &n : carried) {
      EvalValue *v = inner->lookup(n);
      if (v && v->isTensor())
        yields.push_back(v->getTensor());
    }
    createOp(OpKind::Yield, yields, s.getRange(), 0);
    layer.reset();
    block = savedBlock;
    if (f == Flow::Abort || diags.getNumErrors() != errorsBefore) {
      result = Flow::Abort;
      break;
    }
    // The {i} weights this layer declared (and whether it declared any
    // weight without {i}, which a second layer would redeclare: such a body
    // is always evaluated, so the duplicate is reported).
    std::vector<size_t> decls;
    bool reusable = keyed;
    for (size_t w = 0; w < module.weights.size(); ++w) {
      bool isNew = w >= layersBefore.size();
      if (module.weights[w].pattern.find("{i}") == std::string::npos) {
        if (isNew)
          reusable = false;
        continue;
      }
      if (isNew || module.weights[w].layers.size() > layersBefore[w])
        decls.push_back(w);
    }
    size_t kindIndex = kinds.size();
    for (size_t k = 0; k < kinds.size(); ++k)
      if (ir::structurallyEqual(*kinds[k].block, *body)) {
        kindIndex = k;
        break;
      }
    if (kindIndex == kinds.size())
      kinds.push_back({std::move(body), {l}});
    else
      kinds[kindIndex].layers.push_back(l);
    if (reusable)
      memos.push_back({std::move(key), kindIndex, std::move(decls)});
  }
  for (Kind &k : kinds)
    std::sort(k.layers.begin(), k.layers.end());
  block = savedBlock;
  if (result == Flow::Abort)
    return Flow::Abort;

  auto op = std::make_unique<ir::Op>(OpKind::Repeat,
                                     ir::Location{s.getRange(), frame});
  op->operands = inits;
  op->setAttr("var", std::string("i"));
  op->setAttr("begin", begin);
  op->setAttr("end", end);
  for (Kind &k : kinds) {
    k.block->layers = k.layers;
    op->adoptRegion(std::move(k.block));
  }
  for (size_t k = 0; k < carried.size(); ++k)
    op->addResult();
  ir::Op *rep = block->push(std::move(op));
  for (size_t k = 0; k < carried.size(); ++k)
    env->assign(carried[k], EvalValue::tensor(rep->getResult(k)));
  return Flow::Normal;
}

} // namespace archc
