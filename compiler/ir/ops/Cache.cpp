//===- Cache.cpp - Rules for the decode-time caches -----------------------===//
//
// This file implements the `cache` op: the identity until the kv-cache pass
// gives it a past state (rank-4 values [batch, seq, heads, d] are stored
// [batch, heads, seq, d]). A growing cache (self-attention keys and values,
// MLA latents) then yields the full keys, past + new, and the present state.
// A cache computed once (`once`: an encoder-decoder's cross-attention keys
// and values, projected from the encoder output) yields the new entries at
// the first decode call and carries them unchanged afterwards: its present
// state is the new entries in storage layout, or the past state itself when
// the graph's `use_cache_branch` input says the state was already computed.
// `carry` splits such a cache between two graphs, as onnxruntime-genai's
// Whisper does: "output" exports the entries as a present state (the
// encoder graph computes them) and "input" reads them from a past state
// alone (the decoder graph is fed them; what would compute them is dead).
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

namespace archc::ir {

namespace {
bool inferCache(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  if (x.rank() < 2) {
    reportOpError(d, op,
                  fmt::format("state must be [batch, seq, ...], got "
                              "{}",
                              x.str()));
    return false;
  }
  const Value *pastValue = op.operand("past");
  if (!pastValue) {
    op.getResult(0)->type = x;
    if (op.getNumResults() > 1) {
      // carry "output": the entries themselves, in storage layout.
      std::vector<int64_t> layout = cacheLayout(x.rank());
      TensorType present(x.dtype, {});
      for (int64_t axis : layout)
        present.dims.push_back(x.dims[axis]);
      op.getResult(1)->type = present;
    }
    return true;
  }
  // With a past state: full = concat(past, x) along seq (computed once: x).
  const TensorType &past = pastValue->type;
  std::vector<int64_t> layout = cacheLayout(x.rank());
  size_t seqPos = 0;
  for (size_t i = 0; i < layout.size(); ++i)
    if (layout[i] == 1)
      seqPos = i;
  bool ok = past.rank() == x.rank() && past.dtype == x.dtype;
  for (size_t i = 0; ok && i < layout.size(); ++i)
    if (i != seqPos && past.dims[i] != x.dims[layout[i]])
      ok = false;
  if (!ok) {
    reportOpError(d, op,
                  fmt::format("past state {} does not match {} in "
                              "storage layout",
                              past.str(), x.str()));
    return false;
  }
  const bool *once = op.optAttr<bool>("once");
  const std::string *carry = op.optAttr<std::string>("carry");
  TensorType full = x;
  if (!once || !*once)
    full.dims[1] = past.dims[seqPos] + x.dims[1];
  else if (carry && *carry == "input")
    full.dims[1] = past.dims[seqPos]; // the entries fed in, not x
  if (op.getNumResults() > 1 && carry) {
    reportOpError(d, op,
                  fmt::format("a cache carried as '{}' has no present state "
                              "beside its past",
                              *carry));
    return false;
  }
  TensorType present = past;
  present.dims[seqPos] = full.dims[1];
  op.getResult(0)->type = full;
  if (op.getNumResults() > 1)
    op.getResult(1)->type = present;
  return true;
}

bool verifyCache(const Op &op, DiagnosticEngine &d) {
  const bool *once = op.optAttr<bool>("once");
  if (const std::string *carry = op.optAttr<std::string>("carry")) {
    if (!(once && *once)) {
      reportOpError(d, op,
                    "carry splits a cache computed once between two graphs: "
                    "it needs once: true");
      return false;
    }
    if (op.hasOperand("use_cache")) {
      reportOpError(d, op,
                    "a cache carried as '" + *carry +
                        "' has no use_cache operand (one graph computes it, "
                        "the other reads it)");
      return false;
    }
  }
  if (op.hasOperand("use_cache") && !(once && *once)) {
    reportOpError(d, op,
                  "use_cache selects the carried state of a cache computed "
                  "once: it needs once: true");
    return false;
  }
  return true;
}

/// The new tokens' keys or values written to the cache.
OpCost cacheCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const Value *x = op.getOperand(0);
  c.kvWriteBytes = ctx.elements(x->type) * ctx.kvBits() / 8;
  ctx.read(x, c);
  return c;
}
} // namespace

void addCacheSchemas(SchemaList &out) {
  out.push_back(
      SchemaBuilder(OpKind::Cache,
                    "decode-time state that grows along the sequence")
          .describe("The identity until the kv-cache pass gives it a past "
                    "state (rank-4 values [batch, seq, heads, d] are stored "
                    "[batch, heads, seq, d]); it then yields the full keys "
                    "(past + new) and the present state. With `once`, the "
                    "state is computed at the first call from inputs that "
                    "stay the same (an encoder-decoder's cross-attention "
                    "keys and values, from the encoder output) and carried "
                    "unchanged: the graph's use_cache_branch input selects "
                    "the past state instead of x (which is then not "
                    "computed).")
          .language()
          .operand("x", "[batch, seq, ...]: the new tokens' entries")
          .attr("name", AttrType::Identifier,
                "state name: graph I/O past_key_values.{i}.<name>")
          .optAttr("once", AttrType::Bool,
                   "computed once and carried (cross-attention keys and "
                   "values); the past state's length is the computed "
                   "entries', not a prefix of them")
          .optAttr("carry", AttrType::Enum,
                   "with once, the graph's share of a cache split between "
                   "two graphs (onnxruntime-genai's Whisper): \"output\" "
                   "exports the entries as the present state (no past), "
                   "\"input\" reads them from the past state alone (no "
                   "present; x is not computed)")
          .allowed({"input", "output"})
          .passOperand("past", "the past state (kv-cache pass)")
          .passOperand("use_cache", "bool [1]: the past state of a cache "
                                    "computed once holds it (kv-cache pass)")
          .passAttr("layout", AttrType::IntList,
                    "storage order of x's axes in the state")
          .result("keys", "[batch, past + seq, ...] with a past state (x "
                          "when computed once)")
          .passResult("present", "the state after this call")
          .perLayerState()
          .verify(verifyCache)
          .infer(inferCache)
          .cost(cacheCost)
          .take());
}

} // namespace archc::ir
