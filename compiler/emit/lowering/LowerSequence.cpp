//===- LowerSequence.cpp - ONNX lowering of encoder-decoder pieces --------===//
//
// This file lowers what encoders, encoder-decoders and speech models add:
//   positions   Range(past, past + seq) broadcast over the batch; `past` is
//               the length of the graph's growing cache (0 without one)
//   cumsum      CumSum along the axis
//   conv1d      Conv with symmetric zero padding and a stride
//   cache once  an encoder-decoder's cross-attention state: If(use_cache,
//               the past state, the entries computed now); the ops that
//               compute the entries and feed nothing else (the projection
//               of the encoder output) are lowered inside the second
//               branch, so a cached decode step does not run them;
//               carried as "input", the past state alone (the cone is not
//               lowered, and graph inputs only it read are not declared)
//   relative_gather
//               GatherElements of x at the relative-position index of
//               every (row, column) pair, built once per graph from the
//               length as Hugging Face's DeBERTa-v2 builds it (log buckets
//               in float32); by_key gathers along the keys' rows, then
//               transposes
//   relative position bias (T5): the bucket of every (query, key) pair from
//               their absolute indices, as Hugging Face computes it in
//               float32, gathered from the [buckets, heads] table
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"

#include <cmath>
#include <unordered_set>

namespace archc {

using ir::OpKind;

std::string OnnxLowering::pastLength() {
  ir::SymExpr past = ir::SymExpr::symbol("past");
  std::string t = dimTensor(past);
  if (!t.empty())
    return t;
  // The symbol comes from a state input: any growing cache's past length
  // (graph inputs are visible before the op that declares them).
  for (const auto &op : module.graph.body.getOps()) {
    if (op->getKind() != OpKind::StateIn)
      continue;
    const ir::TensorType &type = op->getResult()->type;
    for (size_t i = 0; i < type.dims.size(); ++i)
      if (type.dims[i] == past) {
        std::string name = op->attr<std::string>("name");
        std::string shape = b.node("Shape", {name});
        symbols["past"] =
            b.node("Slice", {shape, b.i64({static_cast<int64_t>(i)}),
                             b.i64({static_cast<int64_t>(i + 1)})});
        return symbols["past"];
      }
  }
  return "";
}

bool OnnxLowering::lowerSequence(const ir::Op &op) {
  const ir::Value *r = op.getResult();
  const std::string &x = in(op.getOperand(0));
  switch (op.getKind()) {
  case OpKind::Positions: {
    std::string shape = b.node(
        "Shape", {x},
        {OnnxAttr::integer("start", 0), OnnxAttr::integer("end", 2)}); // [B, S]
    std::string seq = b.node("Slice", {shape, b.i64({1}), b.i64({2})});
    std::string start = pastLength();
    if (start.empty())
      start = b.i64({0});
    std::string limit = b.node("Add", {start, seq});
    std::string range = b.node("Range", {b.node("Squeeze", {start, b.i64({0})}),
                                         b.node("Squeeze", {limit, b.i64({0})}),
                                         b.i64Scalar(1)}); // [S]
    def(r, b.node("Expand", {b.node("Unsqueeze", {range, b.i64({0})}), shape}));
    return true;
  }
  case OpKind::Cumsum: {
    int64_t axis = op.attr<int64_t>("axis");
    def(r, b.node("CumSum", {x, b.i64Scalar(axis)}));
    return true;
  }
  case OpKind::Conv1d: {
    const ir::TensorType &wt = op.getOperand(1)->type;
    int64_t pad = op.attr<int64_t>("padding");
    std::vector<std::string> ins = {x, in(op.getOperand(1))};
    if (const ir::Value *bias = op.operand("bias"))
      ins.push_back(in(bias));
    std::vector<OnnxAttr> attrs = {
        OnnxAttr::list("kernel_shape", {wt.dims[2].getConstant().value_or(1)}),
        OnnxAttr::list("strides", {op.attr<int64_t>("stride")}),
        OnnxAttr::list("pads", {pad, pad})};
    if (const int64_t *groups = op.optAttr<int64_t>("groups"))
      attrs.push_back(OnnxAttr::integer("group", *groups));
    def(r, b.node("Conv", ins, attrs));
    return true;
  }
  case OpKind::Sinusoidal: {
    int64_t dim = op.attr<int64_t>("dim"), rows = op.attr<int64_t>("rows");
    double base = op.attr<double>("base");
    int64_t sinCols = (dim + 1) / 2;
    std::vector<float> table(static_cast<size_t>(rows * dim));
    for (int64_t p = 0; p < rows; ++p)
      for (int64_t j = 0; j < dim; ++j) {
        // Column j of numpy's position_enc: p / base^(2 (j // 2) / dim);
        // the even columns' sines first, then the odd columns' cosines.
        bool sine = j < sinCols;
        int64_t col = sine ? 2 * j : 2 * (j - sinCols) + 1;
        double angle = static_cast<double>(p) /
                       std::pow(base, 2.0 * static_cast<double>(col / 2) /
                                          static_cast<double>(dim));
        table[static_cast<size_t>(p * dim + j)] =
            static_cast<float>(sine ? std::sin(angle) : std::cos(angle));
      }
    def(r, b.node("Gather", {b.f32(table, {rows, dim}), x},
                  {OnnxAttr::integer("axis", 0)}));
    return true;
  }
  case OpKind::RelativeGather: {
    const ir::TensorType &xt = op.getOperand(0)->type;
    std::string len = dimTensor(xt.dims[xt.rank() - 2]);
    if (len.empty())
      len = b.node("Slice",
                   {b.node("Shape", {x}), b.i64({-2}), b.i64({-1})}); // [1]
    std::string index = relativeIndex(op, len);                       // [L, L]
    // [..., L, L]: the leading dims of x, then L columns.
    std::string shape = b.node(
        "Concat",
        {b.node("Slice", {b.node("Shape", {x}), b.i64({0}), b.i64({-1})}), len},
        {OnnxAttr::integer("axis", 0)});
    std::string y =
        b.node("GatherElements", {x, b.node("Expand", {index, shape})},
               {OnnxAttr::integer("axis", -1)});
    if (op.attr<bool>("by_key")) {
      std::vector<int64_t> perm(xt.rank());
      for (size_t i = 0; i < perm.size(); ++i)
        perm[i] = static_cast<int64_t>(i);
      std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
      y = b.node("Transpose", {y}, {OnnxAttr::list("perm", perm)});
    }
    def(r, y);
    return true;
  }
  default:
    return fail(op, "no lowering");
  }
}

std::string OnnxLowering::relativeIndex(const ir::Op &op,
                                        const std::string &len) {
  int64_t span = op.attr<int64_t>("span");
  const int64_t *maxPosition = op.optAttr<int64_t>("max_position");
  bool byKey = op.attr<bool>("by_key");
  std::string key = "relidx/" + len + "/" + std::to_string(span) + "/" +
                    (maxPosition ? std::to_string(*maxPosition) : "-") + "/" +
                    (byKey ? "key" : "query");
  auto it = maskCache.find(key);
  if (it != maskCache.end())
    return it->second;
  // rel[a, c] = a - c over the rows a and columns c of the gathered tensor
  // (query - key, or with by_key key - query).
  std::string pos =
      b.node("Range", {b.i64Scalar(0), b.node("Squeeze", {len, b.i64({0})}),
                       b.i64Scalar(1)});
  std::string rel = b.node("Sub", {b.node("Unsqueeze", {pos, b.i64({1})}),
                                   b.node("Unsqueeze", {pos, b.i64({0})})});
  if (maxPosition) {
    // make_log_bucket_position: |r| <= m keeps r; farther distances take
    // ceil(log(|r| / m) / log((max_position - 1) / m) (m - 1)) + m with
    // r's sign, in float32 (|r| < m reads m - 1 there, a finite log).
    int64_t mid = span / 2;
    std::string absPos = b.node("Abs", {rel});
    std::string far =
        b.node("Cast", {b.node("Max", {absPos, b.i64Scalar(mid - 1)})},
               {OnnxAttr::integer("to", onnx::TensorProto_DataType_FLOAT)});
    float logRange = std::log(static_cast<float>(
        static_cast<double>(*maxPosition - 1) / static_cast<double>(mid)));
    std::string logPos = b.node(
        "Add",
        {b.node("Ceil",
                {b.node(
                    "Mul",
                    {b.node("Div",
                            {b.node("Log",
                                    {b.node("Div", {far, b.f32Scalar(
                                                             static_cast<float>(
                                                                 mid))})}),
                             b.f32Scalar(logRange)}),
                     b.f32Scalar(static_cast<float>(mid - 1))})}),
         b.f32Scalar(static_cast<float>(mid))});
    std::string signed_ = b.node(
        "Cast",
        {b.node(
            "Mul",
            {logPos,
             b.node("Sign",
                    {b.node("Cast", {rel},
                            {OnnxAttr::integer(
                                "to", onnx::TensorProto_DataType_FLOAT)})})})},
        {OnnxAttr::integer("to", onnx::TensorProto_DataType_INT64)});
    rel = b.node("Where", {b.node("LessOrEqual", {absPos, b.i64Scalar(mid)}),
                           rel, signed_});
  }
  // c2p reads span + bucket(query - key); p2c span - bucket(key - query).
  std::string shifted = byKey ? b.node("Sub", {b.i64Scalar(span), rel})
                              : b.node("Add", {rel, b.i64Scalar(span)});
  std::string index = b.node("Min", {b.node("Max", {shifted, b.i64Scalar(0)}),
                                     b.i64Scalar(2 * span - 1)});
  maskCache[key] = index;
  return index;
}

void OnnxLowering::findOnceCones() {
  // Program order and users of every value of the (expanded) graph body.
  std::unordered_map<const ir::Op *, size_t> order;
  std::unordered_map<const ir::Value *, std::vector<const ir::Op *>> users;
  size_t n = 0;
  for (const auto &op : module.graph.body.getOps()) {
    order[op.get()] = n++;
    for (const ir::Value *v : op->operands)
      users[v].push_back(op.get());
  }
  for (const auto &opPtr : module.graph.body.getOps()) {
    const ir::Op &cache = *opPtr;
    const bool *once = cache.getKind() == OpKind::Cache
                           ? cache.optAttr<bool>("once")
                           : nullptr;
    if (!once || !*once || !cache.hasOperand("past"))
      continue;
    // The ancestors of the cached value, latest first: an op joins the
    // cone when everything that reads its results is in the cone (or is
    // the cache).
    std::vector<const ir::Op *> ancestors;
    std::unordered_set<const ir::Op *> seen;
    std::vector<const ir::Op *> work;
    if (const ir::Op *def = cache.getOperand(0)->getDefiningOp())
      work.push_back(def);
    while (!work.empty()) {
      const ir::Op *p = work.back();
      work.pop_back();
      if (!seen.insert(p).second)
        continue;
      ancestors.push_back(p);
      for (const ir::Value *v : p->operands)
        if (const ir::Op *def = v->getDefiningOp())
          work.push_back(def);
    }
    std::sort(
        ancestors.begin(), ancestors.end(),
        [&](const ir::Op *a, const ir::Op *c) { return order[a] > order[c]; });
    std::unordered_set<const ir::Op *> cone;
    for (const ir::Op *p : ancestors) {
      if (p->getKind() == OpKind::StateIn || !p->getRegions().empty() ||
          inCone.count(p))
        continue;
      bool exclusive = p->getNumResults() > 0;
      for (const auto &res : p->getResults())
        for (const ir::Op *u : users[res.get()])
          exclusive &= u == &cache || cone.count(u) > 0;
      if (exclusive)
        cone.insert(p);
    }
    std::vector<const ir::Op *> &ops = onceCones[&cache];
    for (const ir::Op *p : ancestors)
      if (cone.count(p))
        ops.push_back(p);
    std::sort(ops.begin(), ops.end(), [&](const ir::Op *a, const ir::Op *c) {
      return order[a] < order[c];
    });
    inCone.insert(ops.begin(), ops.end());
  }
}

bool OnnxLowering::lowerOnceCache(const ir::Op &op,
                                  const std::vector<int64_t> &layout) {
  const ir::Value *x = op.getOperand(0);
  const ir::Value *past = op.operand("past");
  const ir::Value *useCache = op.operand("use_cache");
  std::vector<int64_t> inverse(layout.size());
  for (size_t i = 0; i < layout.size(); ++i)
    inverse[static_cast<size_t>(layout[i])] = static_cast<int64_t>(i);
  const std::string *carry = op.optAttr<std::string>("carry");
  if (carry && *carry == "input") {
    // Fed by the runtime: the past state is the entries; the ops that would
    // compute them (its cone) are not lowered.
    std::string fed = in(past);
    storage[op.getResult(0)] = fed;
    deferred[op.getResult(0)] = [this, fed, inverse]() {
      return b.node("Transpose", {fed}, {OnnxAttr::list("perm", inverse)});
    };
    return true;
  }
  if (!useCache)
    return fail(op, "a cache computed once needs the use_cache operand "
                    "(kv-cache pass)");
  // then: the carried state; else: the entries computed from the encoder
  // output, in storage layout.
  SavedCaches saved = saveCaches();
  onnx::GraphProto thenBranch, elseBranch;
  thenBranch.set_name(b.fresh("cached_state"));
  elseBranch.set_name(b.fresh("computed_state"));
  GraphBuilder::Target outer = b.retarget(thenBranch, thenBranch.name() + "_");
  addGraphOutput(thenBranch, b.node("Identity", {in(past)}), act);
  b.restore(std::move(outer));
  outer = b.retarget(elseBranch, elseBranch.name() + "_");
  auto cone = onceCones.find(&op);
  if (cone != onceCones.end())
    for (const ir::Op *p : cone->second)
      if (!lowerOp(*p)) {
        b.restore(std::move(outer));
        restoreCaches(std::move(saved));
        return false;
      }
  std::string stored =
      b.node("Transpose", {in(x)}, {OnnxAttr::list("perm", layout)});
  addGraphOutput(elseBranch, b.node("Identity", {stored}), act);
  b.restore(std::move(outer));
  restoreCaches(std::move(saved));
  std::string cond = b.node("Squeeze", {in(useCache), b.i64({0})});
  std::string present =
      b.nodeN("If", {cond},
              {OnnxAttr::graph("then_branch", std::move(thenBranch)),
               OnnxAttr::graph("else_branch", std::move(elseBranch))},
              1, "cross_state")[0];
  def(op.getResult(1), present);
  storage[op.getResult(0)] = present;
  deferred[op.getResult(0)] = [this, present, inverse]() {
    return b.node("Transpose", {present}, {OnnxAttr::list("perm", inverse)});
  };
  return true;
}

std::string OnnxLowering::relativeBias(const ir::Op &attn, const std::string &q,
                                       const std::string &keys, int64_t kvHeads,
                                       int64_t groups) {
  const ir::Value *table = attn.operand("relative_bias");
  bool bidirectional = !attn.attr<bool>("causal");
  int64_t maxDistance = *attn.optAttr<int64_t>("relative_max_distance");
  int64_t buckets = table->type.dims[0].getConstant().value_or(0);
  std::string key = "relative/" + in(table) + "/" +
                    std::to_string(bidirectional) + "/" +
                    std::to_string(maxDistance) + "/" + keys;
  auto it = maskCache.find(key);
  if (it != maskCache.end())
    return it->second;
  // Key index k and query index T - S + j; relative = k - (T - S + j).
  std::string total =
      b.node("Gather", {b.node("Shape", {keys}), b.i64Scalar(2)},
             {OnnxAttr::integer("axis", 0)});
  std::string s = b.node("Gather", {b.node("Shape", {q}), b.i64Scalar(1)},
                         {OnnxAttr::integer("axis", 0)});
  std::string kpos = b.node("Range", {b.i64Scalar(0), total, b.i64Scalar(1)});
  std::string qpos =
      b.node("Range", {b.node("Sub", {total, s}), total, b.i64Scalar(1)});
  std::string rel =
      b.node("Sub", {b.node("Unsqueeze", {kpos, b.i64({0})}),
                     b.node("Unsqueeze", {qpos, b.i64({1})})}); // [S, T]
  int64_t nb = buckets;
  std::string bucket;
  if (bidirectional) {
    nb /= 2;
    bucket = b.node(
        "Mul",
        {b.node("Cast", {b.node("Greater", {rel, b.i64Scalar(0)})},
                {OnnxAttr::integer("to", onnx::TensorProto_DataType_INT64)}),
         b.i64Scalar(nb)});
    rel = b.node("Abs", {rel});
  } else {
    rel = b.node("Max", {b.node("Neg", {rel}), b.i64Scalar(0)});
  }
  int64_t exact = nb / 2;
  // Hugging Face's float32 steps: log(rel / exact) / log(max_distance /
  // exact) * (nb - exact), truncated; small distances are their own bucket
  // (the large form is computed where it is used only).
  std::string relF = b.node(
      "Cast", {b.node("Max", {rel, b.i64Scalar(std::max<int64_t>(exact, 1))})},
      {OnnxAttr::integer("to", onnx::TensorProto_DataType_FLOAT)});
  float logRange = static_cast<float>(
      std::log(static_cast<double>(maxDistance) / static_cast<double>(exact)));
  std::string scaled = b.node(
      "Mul",
      {b.node("Div",
              {b.node("Log",
                      {b.node("Div",
                              {relF, b.f32Scalar(static_cast<float>(exact))})}),
               b.f32Scalar(logRange)}),
       b.f32Scalar(static_cast<float>(nb - exact))});
  std::string large = b.node(
      "Min",
      {b.node("Add", {b.node("Cast", {scaled},
                             {OnnxAttr::integer(
                                 "to", onnx::TensorProto_DataType_INT64)}),
                      b.i64Scalar(exact)}),
       b.i64Scalar(nb - 1)});
  std::string chosen =
      b.node("Where", {b.node("Less", {rel, b.i64Scalar(exact)}), rel, large});
  bucket = bucket.empty() ? chosen : b.node("Add", {bucket, chosen});
  // table [buckets, H] viewed [buckets, Hkv, G] (query head h = kv head *
  // G + g) -> [S, T, Hkv, G] -> [1, Hkv, G, S, T].
  std::string grouped =
      b.node("Reshape", {in(table), b.i64({buckets, kvHeads, groups})});
  std::string values = widen(
      b.node("Gather", {grouped, bucket}, {OnnxAttr::integer("axis", 0)}));
  std::string bias = b.node(
      "Unsqueeze",
      {b.node("Transpose", {values}, {OnnxAttr::list("perm", {2, 3, 0, 1})}),
       b.i64({0})});
  maskCache[key] = bias;
  return bias;
}

} // namespace archc
