//===- Moe.cpp - Rules for route and experts ------------------------------===//
//
// This file implements verification and type inference for MoE routing
// (`route`: logits [..., E] -> weights, indices [..., k]; with a `table`
// [vocab, k] the indices are table[tokens], hash routing) and expert
// dispatch (`experts`: the body maps tokens [..., D] to [..., D']).
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"

#include <fmt/format.h>

namespace archc::ir {

bool verifyMoe(const Op &op, DiagnosticEngine &d) {
  if (op.getKind() == OpKind::Route) {
    size_t want =
        1 + (op.getBool("bias") ? 1 : 0) + (op.getBool("table") ? 2 : 0);
    if (op.getNumOperands() != want || op.getNumResults() != 2) {
      reportOpError(d, op,
                    "expects (logits[, bias][, table, tokens]) and "
                    "two results");
      return false;
    }
    std::string scoring = op.getString("scoring", "softmax");
    if (scoring != "softmax" && scoring != "sigmoid" &&
        scoring != "sqrtsoftplus" && scoring != "none" &&
        scoring != "sparsemixer") {
      reportOpError(d, op,
                    fmt::format("unknown scoring '{}' (expected "
                                "softmax, sigmoid, sqrtsoftplus, "
                                "sparsemixer or none)",
                                scoring));
      return false;
    }
    if (scoring == "sparsemixer" &&
        (op.getInt("top_k") != 2 || op.getBool("bias") ||
         op.getInt("groups", 1) != 1 || op.getBool("normalize"))) {
      reportOpError(d, op,
                    "sparsemixer routing selects exactly 2 experts "
                    "(top_k: 2) without bias, groups or "
                    "renormalisation");
      return false;
    }
    if (op.getBool("table") &&
        (op.getBool("bias") || op.getInt("groups", 1) != 1 ||
         scoring == "sparsemixer" ||
         op.getString("order", "score_topk") != "score_topk")) {
      reportOpError(d, op,
                    "a routing table fixes the selection: it takes no "
                    "bias, groups, sparsemixer scoring or topk_score "
                    "order");
      return false;
    }
    std::string order = op.getString("order", "score_topk");
    if (order != "score_topk" && order != "topk_score") {
      reportOpError(d, op,
                    fmt::format("unknown order '{}' (expected "
                                "score_topk or topk_score)",
                                order));
      return false;
    }
    if (op.getInt("top_k") <= 0) {
      reportOpError(d, op, "top_k must be positive");
      return false;
    }
    return true;
  }
  if (op.getKind() == OpKind::Experts) {
    if (op.getNumOperands() != 3 || op.getRegions().size() != 1 ||
        op.getInt("count") <= 0) {
      reportOpError(d, op, "expects (x, weights, indices), a count and a body");
      return false;
    }
    const Op *term = op.getRegions()[0]->getTerminator();
    if (!term || term->getKind() != OpKind::Yield ||
        term->getNumOperands() != 1) {
      reportOpError(d, op, "body must end with a yield of one tensor");
      return false;
    }
  }
  return true;
}

bool inferMoe(Op &op, DiagnosticEngine &d) {
  if (op.getKind() == OpKind::Route) {
    const TensorType &l = op.getOperand(0)->type;
    if (l.rank() < 1 || !isFloat(l.dtype)) {
      reportOpError(
          d, op, fmt::format("logits must be a float tensor, got {}", l.str()));
      return false;
    }
    auto e = l.dims.back().getConstant();
    int64_t k = op.getInt("top_k"), groups = op.getInt("groups", 1),
            topkGroups = op.getInt("topk_groups", 1);
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
    if (op.getBool("bias")) {
      const TensorType &b = op.getOperand(1)->type;
      if (b.rank() != 1 || b.dims[0] != l.dims.back()) {
        reportOpError(d, op,
                      fmt::format("bias {} must have one value per "
                                  "expert",
                                  b.str()));
        return false;
      }
    }
    if (op.getBool("table")) {
      size_t t = op.getBool("bias") ? 2 : 1;
      const TensorType &table = op.getOperand(t)->type;
      const TensorType &tokens = op.getOperand(t + 1)->type;
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
  if (op.getKind() == OpKind::Experts) {
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
  return true;
}

} // namespace archc::ir
