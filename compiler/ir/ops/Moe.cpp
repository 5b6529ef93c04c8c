//===- Moe.cpp - Rules for route and experts ------------------------------===//
//
// This file implements verification and type inference for MoE routing
// (`route`: logits [..., E] -> weights, indices [..., k]; with a `table`
// [vocab, k] the indices are table[tokens], hash routing) and expert
// dispatch (`experts`: the body maps tokens [..., D] to [..., D']).
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

namespace archc::ir {

namespace {
bool verifyRoute(const Op &op, DiagnosticEngine &d) {
  const std::string &scoring = op.attr<std::string>("scoring");
  bool bias = op.hasOperand("bias");
  bool grouped = op.attr<int64_t>("groups") != 1;
  if (scoring == "sparsemixer" && (op.attr<int64_t>("top_k") != 2 || bias ||
                                   grouped || op.attr<bool>("normalize"))) {
    reportOpError(d, op,
                  "sparsemixer routing selects exactly 2 experts (top_k: 2) "
                  "without bias, groups or renormalisation");
    return false;
  }
  if ((op.hasAttr("norm_p") || op.hasAttr("norm_min")) &&
      !op.attr<bool>("normalize")) {
    reportOpError(d, op, "norm_p and norm_min need normalize: true");
    return false;
  }
  if (op.hasAttr("group_score") && !grouped) {
    reportOpError(d, op, "group_score needs expert groups (groups > 1)");
    return false;
  }
  if (op.hasOperand("table") &&
      (bias || grouped || scoring == "sparsemixer" ||
       op.attr<std::string>("order") != "score_topk")) {
    reportOpError(d, op,
                  "a routing table fixes the selection: it takes no bias, "
                  "groups, sparsemixer scoring or topk_score order");
    return false;
  }
  return true;
}

bool verifyExperts(const Op &op, DiagnosticEngine &d) {
  const Op *term = op.getRegions()[0]->getTerminator();
  if (!term || term->getKind() != OpKind::Yield ||
      term->getNumOperands() != 1) {
    reportOpError(d, op, "body must end with a yield of one tensor");
    return false;
  }
  return true;
}

bool inferRoute(Op &op, DiagnosticEngine &d) {
  const TensorType &l = op.getOperand(0)->type;
  if (l.rank() < 1 || !isFloat(l.dtype)) {
    reportOpError(
        d, op, fmt::format("logits must be a float tensor, got {}", l.str()));
    return false;
  }
  auto e = l.dims.back().getConstant();
  int64_t k = op.attr<int64_t>("top_k"), groups = op.attr<int64_t>("groups"),
          topkGroups = op.attr<int64_t>("topk_groups");
  if (!e || k > *e) {
    reportOpError(d, op,
                  fmt::format("top_k {} exceeds the {} experts of {}", k,
                              l.dims.back().str(), l.str()));
    return false;
  }
  if (groups <= 0 || *e % groups != 0 || topkGroups <= 0 ||
      topkGroups > groups || k > (*e / groups) * topkGroups) {
    reportOpError(d, op,
                  fmt::format("groups {} / topk_groups {} do not fit "
                              "{} experts with top_k {}",
                              groups, topkGroups, *e, k));
    return false;
  }
  if (const Value *bias = op.operand("bias")) {
    const TensorType &b = bias->type;
    if (b.rank() != 1 || b.dims[0] != l.dims.back()) {
      reportOpError(d, op,
                    fmt::format("bias {} must have one value per "
                                "expert",
                                b.str()));
      return false;
    }
  }
  if (const Value *tableValue = op.operand("table")) {
    const TensorType &table = tableValue->type;
    const TensorType &tokens = op.operand("tokens")->type;
    bool intTable = table.dtype == DType::I64 || table.dtype == DType::I32;
    bool intTokens = tokens.dtype == DType::I64 || tokens.dtype == DType::I32;
    if (!intTable || table.rank() != 2 || table.dims[1] != SymExpr(k)) {
      reportOpError(d, op,
                    fmt::format("table {} must be integer [vocab, "
                                "top_k] with top_k = {}",
                                table.str(), k));
      return false;
    }
    std::vector<SymExpr> lead(l.dims.begin(), l.dims.end() - 1);
    if (!intTokens || tokens.dims != lead) {
      reportOpError(d, op,
                    fmt::format("tokens {} must be integer ids with "
                                "the leading dims of the logits {}",
                                tokens.str(), l.str()));
      return false;
    }
  }
  std::vector<SymExpr> dims = l.dims;
  dims.back() = k;
  op.getResult(0)->type = TensorType(l.dtype, dims);
  op.getResult(1)->type = TensorType(DType::I64, dims);
  return true;
}

bool inferExperts(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  const TensorType &w = op.getOperand(1)->type;
  const TensorType &i = op.getOperand(2)->type;
  if (w.rank() != i.rank() || w.dims != i.dims || x.rank() != w.rank()) {
    reportOpError(d, op,
                  fmt::format("weights {} and indices {} must be "
                              "[..., k] over the tokens of {}",
                              w.str(), i.str(), x.str()));
    return false;
  }
  for (size_t k = 0; k + 1 < x.rank(); ++k)
    if (x.dims[k] != w.dims[k]) {
      reportOpError(d, op,
                    fmt::format("routing {} does not cover the "
                                "tokens of {}",
                                w.str(), x.str()));
      return false;
    }
  if (i.dtype != DType::I64 && i.dtype != DType::I32) {
    reportOpError(d, op, "indices must be integers");
    return false;
  }
  const Op *term = op.getRegions()[0]->getTerminator();
  op.getResult()->type = term->getOperand(0)->type;
  return true;
}

/// Per token: the scores (a fixed FLOP count per scored logit), the
/// selection (one compare per expert) and the renormalisation.
OpCost routeCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const TensorType &l = op.getOperand(0)->type;
  double e = ctx.dim(l.dims.back()), tokens = ctx.elements(l) / e;
  double k = static_cast<double>(op.attr<int64_t>("top_k"));
  const std::string &scoring = op.attr<std::string>("scoring");
  double perScore = scoring == "softmax"        ? 5
                    : scoring == "sigmoid"      ? 3
                    : scoring == "sqrtsoftplus" ? 4
                    : scoring == "sparsemixer"  ? 2 * (4 + 5)
                                                : 0;
  double scored = op.attr<std::string>("order") == "topk_score" ? k : e;
  double normFlops = 0;
  if (op.attr<bool>("normalize"))
    normFlops = op.hasAttr("norm_p") ? 4 * k : 2 * k;
  c.flops = tokens * (perScore * scored + e + normFlops);
  c.transcendentals = scoring == "none" ? 0 : tokens * scored;
  readOperandsWriteResults(op, ctx, c);
  return c;
}

/// Compute and activations: every token through k experts; weights: each
/// distinct expert the batch touches read once; then the weighted sum.
OpCost expertsCost(const Op &op, const CostContext &ctx) {
  OpCost perExpertAllTokens = ctx.regionCost(*op.getRegions()[0]);
  const TensorType &x = op.getOperand(0)->type;
  double tokens = ctx.elements(x) / ctx.dim(x.dims.back());
  const TensorType &w = op.getOperand(1)->type;
  double k = ctx.dim(w.dims.back());
  double e = static_cast<double>(op.attr<int64_t>("count"));
  OpCost c = perExpertAllTokens.scaled(k);
  c.weightBytes = perExpertAllTokens.weightBytes *
                  expectedDistinctExperts(static_cast<int64_t>(e),
                                          static_cast<int64_t>(k), tokens);
  // The weighted sum (k multiplies and adds per output element); with
  // scale_input the multiplies are on the inputs and the sum is plain.
  double out = ctx.elements(op.getResult()->type);
  const bool *scaleInput = op.optAttr<bool>("scale_input");
  c.flops +=
      scaleInput && *scaleInput ? k * (ctx.elements(x) + out) : 2 * k * out;
  readOperandsWriteResults(op, ctx, c);
  return c;
}
} // namespace

void addMoeSchemas(SchemaList &out) {
  out.push_back(
      SchemaBuilder(OpKind::Route, "MoE router: (weights, indices)")
          .describe("Scores the experts (softmax, sigmoid, sqrt-softplus, "
                    "sparsemixer or the raw logits), selects top_k per token "
                    "(score then select, or select on the logits then score "
                    "the k: topk_score), optionally among the best "
                    "topk_groups of `groups` expert groups and with a "
                    "selection-only bias, renormalises and scales. With a "
                    "table [vocab, top_k] the experts of token t are "
                    "table[t] (hash routing).")
          .language()
          .operand("logits", "float [..., experts]")
          .attr("top_k", AttrType::Int, "experts per token")
          .atLeast(1)
          .attr("scoring", AttrType::Enum, std::string("softmax"),
                "how logits become weights")
          .allowed(
              {"softmax", "sigmoid", "sqrtsoftplus", "sparsemixer", "none"})
          .attr("order", AttrType::Enum, std::string("score_topk"),
                "score then select, or select on logits then score")
          .allowed({"score_topk", "topk_score"})
          .attr("normalize", AttrType::Bool, false,
                "renormalise the k weights: divide by their p-norm")
          .optAttr("norm_p", AttrType::Float,
                   "the p of the renormalisation; none: 1, the sum (DBRX's "
                   "moe_normalize_expert_weights)")
          .above(0)
          .optAttr("norm_min", AttrType::Float,
                   "lower bound of the renormalisation divisor (ERNIE's "
                   "moe_norm_min)")
          .attr("scale", AttrType::Float, 1.0, "routed scaling factor")
          .nonZero()
          .optOperand("bias", "[experts]: added to the scores for selection "
                              "only")
          .attr("groups", AttrType::Int, int64_t(1), "expert groups")
          .atLeast(1)
          .attr("topk_groups", AttrType::Int, int64_t(1),
                "groups kept per token (ranked by group_score)")
          .atLeast(1)
          .optAttr("group_score", AttrType::Enum,
                   "a group's rank: \"max\", its best selection score "
                   "(DeepSeek-V2's group_limited_greedy); none: the sum of "
                   "its best two (DeepSeek-V3)")
          .allowed({"max"})
          .optAttr("jitter_eps", AttrType::Float,
                   "sparsemixer's threshold (router_jitter_noise)")
          .optOperand("table",
                      "integer [vocab, top_k]: fixed experts per "
                      "token id",
                      "tokens")
          .optOperand("tokens", "integer token ids [...]", "table")
          .result("weights", "[..., top_k]")
          .result("indices", "int64 [..., top_k]")
          .verify(verifyRoute)
          .infer(inferRoute)
          .cost(routeCost)
          .costHandlesDensity()
          .denseResults()
          .take());
  out.push_back(
      SchemaBuilder(OpKind::Experts,
                    "weighted sum of the selected experts' outputs")
          .describe("The body `fn(tokens, e)` is one expert's computation "
                    "(weights named with {e}, or w[e] of stacked weights); "
                    "each token's output is the sum of weights[j] * "
                    "body_{indices[j]}(token), or with scale_input of "
                    "body_{indices[j]}(weights[j] * token).")
          .language()
          .operand("x", "[..., D]: the tokens")
          .operand("weights", "[..., k] routing weights")
          .operand("indices", "integer [..., k] expert indices")
          .attr("count", AttrType::Int, "number of routed experts")
          .atLeast(1)
          .optAttr("scale_input", AttrType::Bool,
                   "true: weight each token's input to an expert instead of "
                   "the expert's output (Llama 4)")
          .region("body", {"tokens"}, {"e"},
                  "fn(tokens, e): one expert over [..., D] tokens")
          .result("result", "[..., D'] as the body returns")
          .notInExpertBody()
          .verify(verifyExperts)
          .infer(inferExperts)
          .cost(expertsCost)
          .costHandlesDensity()
          .denseResults()
          .take());
}

} // namespace archc::ir
