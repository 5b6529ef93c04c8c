//===- LowerAttention.cpp - ONNX lowering of rope, cache, attention -------===//
//
// This file lowers the attention family:
//   rope:      cos/sin computed once per rotary configuration from
//              position_ids and the inverse frequencies (run-time choice for
//              dynamic and longrope scaling) as cos and sin of signed angles
//              over the whole head; x * cos + swap(x) * sin with the halves
//              swapped (half-split: Split, Concat) or the pair members
//              (interleaved: a matmul by the swap permutation), the sign in
//              the sin table; partial rotary dims pass through (angle 0).
//   cache:     new keys/values are moved to the [batch, heads, seq, d]
//              storage layout and appended to the past state (Concat); the
//              result is the present state.
//   attention: GQA without repeating K/V (each KV head's G * S queries are
//              the rows of one matmul against its keys, no broadcast),
//              scaled scores, optional soft-capping, a boolean mask from
//              absolute positions (causal, sliding window, chunks counted
//              from the first real token) and the padding mask, optional sinks,
//              softmax in float32. Extra keys/values (compressed entries) get
//              their own scores, masked causally (no window) and by the extra
//              mask, and join the softmax. ALiBi adds slope x key position
//              (positions counted over the padding mask, optionally rounded to
//              bfloat16) to the scores.
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"

#include "emit/lowering/AlibiSlopes.h"
#include "emit/lowering/RopeTables.h"
#include "ir/OpRules.h"

#include <cfloat>
#include <climits>
#include <cmath>

namespace archc {

using ir::OpKind;

bool OnnxLowering::lowerRope(const ir::Op &op) {
  const ir::TensorType &xt = op.getOperand(0)->type;
  int64_t headDim = xt.dims[3].getConstant().value_or(0);
  RopeTables tables;
  std::string error;
  if (!computeRope(op, headDim, tables, error))
    return fail(op, error);
  int64_t rot = tables.rotaryDim, half = rot / 2;
  bool interleaved = op.attr<bool>("interleaved");
  const std::string &pos = in(op.getOperand(1));

  bool multiAxis = op.getOperand(1)->type.rank() == 3; // M-RoPE
  std::string key = ir::attrStr(ir::Attr(std::vector<double>(
                        tables.invFreq.begin(), tables.invFreq.end()))) +
                    tables.type + std::to_string(tables.attentionFactor) +
                    (interleaved ? "i" : "h") + std::to_string(headDim) + pos +
                    (multiAxis ? ir::attrStr(ir::Attr(ir::mropeSections(op))) +
                                     (ir::mropeInterleaved(op) ? "I" : "C")
                               : "");
  auto cached = ropeCache.find(key);
  std::string cosT, sinT;
  if (cached != ropeCache.end()) {
    std::tie(cosT, sinT) = cached->second;
  } else {
    // A run-time inverse-frequency tensor where the frequencies are not
    // constants (dynamic, longrope, M-RoPE's per-row selection); "" else.
    bool constantFreqs =
        tables.type != "dynamic" && tables.type != "longrope" && !multiAxis;
    std::string invFreq = constantFreqs ? "" : b.f32(tables.invFreq, {half});
    std::string posF =
        b.node("Cast", {pos},
               {OnnxAttr::integer("to", onnx::TensorProto_DataType_FLOAT)});
    if (tables.type == "dynamic" || tables.type == "longrope") {
      // Sequence length seen by this call: max(position) + 1.
      std::string len = b.node(
          "Add",
          {b.node("ReduceMax", {posF}, {OnnxAttr::integer("keepdims", 0)}),
           b.f32Scalar(1.0f)});
      if (tables.type == "longrope") {
        std::string isLong =
            b.node("Greater",
                   {len, b.f32Scalar(static_cast<float>(tables.originalMax))});
        invFreq = b.node("Where",
                         {isLong, b.f32(tables.invFreqLong, {half}), invFreq});
      } else {
        // base' = base * (factor * L / max - (factor - 1))^(d / (d - 2)),
        // L = max(len, max_positions).
        float maxPos = static_cast<float>(tables.maxPositions);
        std::string l = b.node("Max", {len, b.f32Scalar(maxPos)});
        std::string ratio = b.node(
            "Sub",
            {b.node("Div", {b.node("Mul", {l, b.f32Scalar(static_cast<float>(
                                                  tables.factor))}),
                            b.f32Scalar(maxPos)}),
             b.f32Scalar(static_cast<float>(tables.factor - 1))});
        std::string base = b.node(
            "Mul",
            {b.f32Scalar(static_cast<float>(tables.base)),
             b.node("Pow", {ratio, b.f32Scalar(static_cast<float>(rot) /
                                               static_cast<float>(rot - 2))})});
        std::vector<float> expo;
        for (int64_t i = 0; i < half; ++i)
          expo.push_back(-static_cast<float>(2 * i) / static_cast<float>(rot));
        invFreq = b.node("Pow", {base, b.f32(expo, {half})});
      }
    }
    // Angles over the whole head, the sign of the rotation folded in:
    // cos is even and sin odd, so cos(angles) and sin(angles) are the two
    // tables directly, and a pass-through dim (partial rotary) has angle 0,
    // cos 1 and sin 0, so one rotation is x * cos + swap(x) * sin, exactly.
    // Half-split: angles [-a, a, 0...] (a = position * inv_freq), swap
    // exchanges the halves. Interleaved: [-a0, a0, -a1, a1, ..., 0...],
    // swap exchanges the members of each pair.
    // spread [half, head dim]: frequency i's +-1 at the two dims it rotates
    // (the first takes the minus sign), 0 on pass-through dims.
    std::vector<float> spread(static_cast<size_t>(half * headDim), 0.0f);
    for (int64_t i = 0; i < half; ++i) {
      int64_t first = interleaved ? 2 * i : i;
      int64_t second = interleaved ? 2 * i + 1 : i + half;
      spread[static_cast<size_t>(i * headDim + first)] = -1.0f;
      spread[static_cast<size_t>(i * headDim + second)] = 1.0f;
    }
    std::string posCol = b.node("Unsqueeze", {posF, b.i64({-1})});
    std::string angles;
    if (invFreq.empty()) {
      // Constant frequencies: inv_freq x spread folded here (one term per
      // dim, exact), position x that row.
      std::vector<float> signedFreq(static_cast<size_t>(headDim), 0.0f);
      for (int64_t i = 0; i < half; ++i)
        for (int64_t j = 0; j < headDim; ++j)
          signedFreq[static_cast<size_t>(j)] +=
              tables.invFreq[static_cast<size_t>(i)] *
              spread[static_cast<size_t>(i * headDim + j)];
      angles = b.node("Mul", {posCol, b.f32(signedFreq, {headDim})});
    } else {
      // freqs [batch, seq, half] = position * inv_freq, then x spread.
      std::string freqs = b.node("Mul", {posCol, invFreq});
      if (multiAxis)
        freqs = mropeFrequencies(op, freqs, half);
      angles = b.node("MatMul", {freqs, b.f32(spread, {half, headDim})});
    }
    cosT = b.node("Cos", {angles});
    sinT = b.node("Sin", {angles});
    if (tables.attentionFactor != 1.0) {
      float f = static_cast<float>(tables.attentionFactor);
      // Pass-through dims keep cos 1.
      std::vector<float> cosScale(static_cast<size_t>(headDim), 1.0f);
      std::fill(cosScale.begin(), cosScale.begin() + rot, f);
      cosT = b.node("Mul", {cosT, rot == headDim ? b.f32Scalar(f)
                                                 : b.f32(cosScale, {headDim})});
      sinT = b.node("Mul", {sinT, b.f32Scalar(f)});
    }
    // Broadcast over heads: [batch, seq, 1, head dim].
    cosT = narrow(b.node("Unsqueeze", {cosT, b.i64({2})}));
    sinT = narrow(b.node("Unsqueeze", {sinT, b.i64({2})}));
    ropeCache[key] = {cosT, sinT};
  }

  const std::string &x = in(op.getOperand(0));
  std::string swapped;
  if (!interleaved) {
    // [x2, x1, pass].
    std::vector<std::string> parts =
        rot == headDim
            ? b.nodeN("Split", {x}, {OnnxAttr::integer("axis", 3)}, 2)
            : b.nodeN("Split", {x, b.i64({half, half, headDim - rot})},
                      {OnnxAttr::integer("axis", 3)}, 3);
    std::swap(parts[0], parts[1]);
    swapped = b.node("Concat", parts, {OnnxAttr::integer("axis", -1)});
  } else {
    // [x1, x0, x3, x2, ..., 0...]: one matmul by the pair-swap permutation
    // (exact: each output is one input times 1; pass-through dims give 0,
    // which the sin table's 0 multiplies anyway).
    std::vector<float> perm(static_cast<size_t>(headDim * headDim), 0.0f);
    for (int64_t i = 0; i < rot; ++i)
      perm[static_cast<size_t>((i ^ 1) * headDim + i)] = 1.0f;
    swapped = b.node("MatMul",
                     {x, narrowTo(b.f32(perm, {headDim, headDim}), xt.dtype)});
  }
  std::string rotated =
      b.node("Add", {b.node("Mul", {x, cosT}), b.node("Mul", {swapped, sinT})});
  def(op.getResult(), rotated);
  return true;
}

bool OnnxLowering::lowerCache(const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  std::vector<int64_t> layout;
  if (auto *l = op.optAttr<std::vector<int64_t>>("layout"))
    layout = *l;
  else
    for (size_t i = 0; i < x->type.rank(); ++i)
      layout.push_back(x->type.rank() == 4 ? std::vector<int64_t>{0, 2, 1, 3}[i]
                                           : static_cast<int64_t>(i));
  bool identity = true;
  for (size_t i = 0; i < layout.size(); ++i)
    identity &= layout[i] == static_cast<int64_t>(i);
  const ir::Value *past = op.operand("past");
  const bool *once = op.optAttr<bool>("once");
  if (past && once && *once)
    return lowerOnceCache(op, layout);
  std::string stored =
      identity ? in(x)
               : b.node("Transpose", {in(x)}, {OnnxAttr::list("perm", layout)});
  if (!past) {
    def(op.getResult(0), in(x));
    storage[op.getResult(0)] = stored;
    if (op.getNumResults() > 1) // carry "output": the entries exported
      def(op.getResult(1), stored);
    return true;
  }
  int64_t seqAxis = 0;
  for (size_t i = 0; i < layout.size(); ++i)
    if (layout[i] == 1)
      seqAxis = static_cast<int64_t>(i);
  std::string present = b.node("Concat", {in(past), stored},
                               {OnnxAttr::integer("axis", seqAxis)});
  def(op.getResult(1), present);
  storage[op.getResult(0)] = present;
  // The compute-layout form is materialised only if something needs it.
  std::vector<int64_t> inverse(layout.size());
  for (size_t i = 0; i < layout.size(); ++i)
    inverse[static_cast<size_t>(layout[i])] = static_cast<int64_t>(i);
  if (identity)
    def(op.getResult(0), present);
  else
    deferred[op.getResult(0)] = [this, present, inverse]() {
      return b.node("Transpose", {present}, {OnnxAttr::list("perm", inverse)});
    };
  return true;
}

std::string OnnxLowering::storageOf(const ir::Value *v) {
  auto it = storage.find(v);
  if (it != storage.end())
    return it->second;
  return b.node("Transpose", {in(v)}, {OnnxAttr::list("perm", {0, 2, 1, 3})});
}

std::string OnnxLowering::allowedMask(const ir::Op &attn, const std::string &q,
                                      const std::string &keys, int64_t keysAxis,
                                      int64_t window, int64_t chunk) {
  bool causal = attn.attr<bool>("causal");
  const ir::Value *mask = attn.operand("mask");
  bool masked = mask != nullptr;
  std::string padding = masked ? in(mask) : "";
  // Masks depend on lengths only, which every layer shares: key by the
  // query/key length sources rather than the tensors.
  std::string lengthKey = std::to_string(causal) + "/" +
                          std::to_string(window) + "/" + std::to_string(chunk) +
                          "/" + padding;
  // Without a padding mask the keys give the length: ops over keys of
  // another length (cross-attention) build their own.
  if (!masked)
    lengthKey += "/keys=" + attn.getOperand(1)->type.dims[1].str();
  if (attn.getKind() == OpKind::Attention)
    for (const char *extra : {"key_mask", "segments", "bidirectional"})
      if (const ir::Value *v = attn.operand(extra))
        lengthKey += std::string("/") + extra + "=" + in(v);
  auto it = maskCache.find(lengthKey);
  if (it != maskCache.end())
    return it->second;
  // Lengths: total keys T (from the padding mask, or the key state) and
  // queries S; query j sits at absolute index T - S + j.
  std::string total =
      masked
          ? b.node("Gather", {b.node("Shape", {padding}), b.i64Scalar(1)},
                   {OnnxAttr::integer("axis", 0)})
          : b.node("Gather", {b.node("Shape", {keys}), b.i64Scalar(keysAxis)},
                   {OnnxAttr::integer("axis", 0)});
  std::string s = b.node("Gather", {b.node("Shape", {q}), b.i64Scalar(1)},
                         {OnnxAttr::integer("axis", 0)});
  std::string kpos = b.node("Range", {b.i64Scalar(0), total, b.i64Scalar(1)});
  std::string qpos =
      b.node("Range", {b.node("Sub", {total, s}), total, b.i64Scalar(1)});
  std::string kRow = b.node("Unsqueeze", {kpos, b.i64({0})}); // [1, T]
  std::string qCol = b.node("Unsqueeze", {qpos, b.i64({1})}); // [S, 1]
  std::string allowed;
  if (causal)
    allowed = b.node("LessOrEqual", {kRow, qCol});
  if (window > 0) {
    // Causal: the last `window` keys; otherwise |query - key| < window.
    std::string inWindow =
        b.node("Greater", {kRow, b.node("Sub", {qCol, b.i64Scalar(window)})});
    if (!causal)
      inWindow = b.node(
          "And",
          {inWindow,
           b.node("Less", {kRow, b.node("Add", {qCol, b.i64Scalar(window)})})});
    allowed = allowed.empty() ? inWindow : b.node("And", {allowed, inWindow});
  }
  if (chunk > 0) {
    // Same chunk: (index - left padding) / chunk equal for query and key
    // (Hugging Face's chunked mask); padding keys are masked anyway.
    std::string c = b.i64Scalar(chunk);
    std::string sameChunk;
    if (masked) {
      std::string lead = b.node(
          "ArgMax",
          {b.node("Cast", {padding},
                  {OnnxAttr::integer("to", onnx::TensorProto_DataType_FLOAT)})},
          {OnnxAttr::integer("axis", 1), OnnxAttr::integer("keepdims", 1)});
      std::string lead3 = b.node("Unsqueeze", {lead, b.i64({2})}); // [B,1,1]
      std::string kc = b.node("Div", {b.node("Sub", {kRow, lead3}), c});
      std::string qc = b.node("Div", {b.node("Sub", {qCol, lead3}), c});
      sameChunk = b.node("Unsqueeze", {b.node("Equal", {kc, qc}),
                                       b.i64({1, 2})}); // [B, 1, 1, S, T]
    } else {
      sameChunk =
          b.node("Equal", {b.node("Div", {kRow, c}), b.node("Div", {qCol, c})});
    }
    allowed = allowed.empty() ? sameChunk : b.node("And", {allowed, sameChunk});
  }
  allowed = bidirectionalRuns(attn, allowed, q, total);
  if (masked) {
    std::string pad = b.node(
        "Unsqueeze",
        {b.node("Cast", {padding},
                {OnnxAttr::integer("to", onnx::TensorProto_DataType_BOOL)}),
         b.i64({1, 2, 3})}); // [B, 1, 1, 1, T]
    allowed = allowed.empty() ? pad : b.node("And", {allowed, pad});
  }
  allowed = keyAndSegmentMasks(attn, allowed);
  if (allowed.empty())
    allowed = b.scalar(1, onnx::TensorProto_DataType_BOOL);
  maskCache[lengthKey] = allowed;
  return allowed;
}

std::string OnnxLowering::alibiBias(const ir::Op &attn, const std::string &keys,
                                    int64_t kvHeads, int64_t groups) {
  double scale = *attn.optAttr<double>("alibi");
  const bool *roundBf16 = attn.optAttr<bool>("alibi_bf16");
  bool bf16 = roundBf16 && *roundBf16;
  const ir::Value *mask = attn.operand("mask");
  std::string padding = mask ? in(mask) : "";
  std::string key = "alibi/" + padding + "/" + std::to_string(kvHeads) + "/" +
                    std::to_string(groups) + "/" + std::to_string(scale) +
                    (bf16 ? "/bf16" : "");
  auto it = maskCache.find(key);
  if (it != maskCache.end())
    return it->second;
  // Key positions [B, T]: a key's index among its row's real tokens
  // ((cumsum(mask) - 1) * mask, as Hugging Face's build_alibi_tensor), or
  // 0 .. T - 1 without a padding mask ([1, T]).
  std::string positions;
  if (mask) {
    std::string counted = b.node(
        "Sub", {b.node("CumSum", {padding, b.i64Scalar(1)}), b.i64Scalar(1)});
    positions = b.node("Mul", {counted, padding});
  } else {
    std::string total =
        b.node("Gather", {b.node("Shape", {keys}), b.i64Scalar(2)},
               {OnnxAttr::integer("axis", 0)});
    positions = b.node(
        "Unsqueeze",
        {b.node("Range", {b.i64Scalar(0), total, b.i64Scalar(1)}), b.i64({0})});
  }
  positions = b.node(
      "Unsqueeze",
      {b.node("Cast", {positions},
              {OnnxAttr::integer("to", onnx::TensorProto_DataType_FLOAT)}),
       b.i64({1, 2, 3})}); // [B, 1, 1, 1, T]
  // Query head h = kv head * groups + g, as the scores are grouped.
  std::string slopes =
      b.f32(alibiSlopes(kvHeads * groups, bf16), {1, kvHeads, groups, 1, 1});
  std::string bias = b.node("Mul", {slopes, positions});
  if (bf16)
    bias = b.node("Cast",
                  {b.node("Cast", {bias},
                          {OnnxAttr::integer(
                              "to", onnx::TensorProto_DataType_BFLOAT16)})},
                  {OnnxAttr::integer("to", onnx::TensorProto_DataType_FLOAT)});
  bias = b.node("Mul", {bias, b.f32Scalar(static_cast<float>(scale))});
  maskCache[key] = bias;
  return bias;
}

std::string OnnxLowering::groupedScores(const std::string &q4,
                                        const std::string &keys,
                                        const GroupedDims &dims) {
  // [B, Hkv, G * S, D] x [B, Hkv, D, T]: ONNX Runtime folds the Transpose
  // into the matmul (transB), so the cache is not copied either.
  std::string kT =
      b.node("Transpose", {keys}, {OnnxAttr::list("perm", {0, 1, 3, 2})});
  std::string scores = widen(b.node("MatMul", {q4, kT}));
  // Viewed [B, Hkv, G, S, T] for the masks and biases. The shape comes from
  // the symbolic dims, built once per graph; from the scores themselves
  // when a dim is not a graph symbol.
  std::string shape = sharedShape(
      {dims.batch, dims.kvHeads, dims.groups, dims.seq, dims.total});
  if (shape.empty()) {
    std::string s = b.node("Shape", {scores});
    shape = b.node("Concat",
                   {b.node("Slice", {s, b.i64({0}), b.i64({1})}),
                    b.i64({dims.kvHeads, dims.groups, -1}),
                    b.node("Slice", {s, b.i64({3}), b.i64({4})})},
                   {OnnxAttr::integer("axis", 0)});
  }
  return b.node("Reshape", {scores, shape});
}

std::string OnnxLowering::groupedValues(const std::string &probs5,
                                        const std::string &values,
                                        const GroupedDims &dims) {
  // [B, Hkv, G, S, T] -> [B, Hkv, G * S, T] x [B, Hkv, T, Dv]
  std::string shape = sharedShape(
      {dims.batch, dims.kvHeads, dims.seq * dims.groups, dims.total});
  if (shape.empty()) {
    std::string s = b.node("Shape", {probs5});
    shape = b.node("Concat",
                   {b.node("Slice", {s, b.i64({0}), b.i64({2})}), b.i64({-1}),
                    b.node("Slice", {s, b.i64({4}), b.i64({5})})},
                   {OnnxAttr::integer("axis", 0)});
  }
  std::string p4 = b.node("Reshape", {narrow(probs5), shape});
  return b.node("MatMul", {p4, values});
}

bool OnnxLowering::lowerAttention(const ir::Op &op) {
  const ir::TensorType &qt = op.getOperand(0)->type;
  const ir::TensorType &kt = op.getOperand(1)->type;
  const ir::TensorType &vt = op.getOperand(2)->type;
  int64_t h = qt.dims[2].getConstant().value_or(0);
  int64_t hk = kt.dims[2].getConstant().value_or(0);
  int64_t d = qt.dims[3].getConstant().value_or(0);
  int64_t dv = vt.dims[3].getConstant().value_or(0);
  int64_t groups = h / hk;
  const std::string &q = in(op.getOperand(0));
  // q [B, S, H, D] -> [B, Hkv, G * S, D]: each KV head's queries are the
  // rows of one matmul against that head's keys, which are read once (no
  // broadcast over the groups, no repeated K/V).
  std::string q4 =
      b.node("Reshape",
             {b.node("Transpose", {q}, {OnnxAttr::list("perm", {0, 2, 1, 3})}),
              b.i64({0, hk, -1, d})});
  GroupedDims dims{qt.dims[0], hk, groups, qt.dims[1], kt.dims[1]};
  std::string scores = groupedScores(q4, storageOf(op.getOperand(1)), dims);
  const double *scaleAttr = op.optAttr<double>("scale");
  double scale =
      scaleAttr ? *scaleAttr : 1.0 / std::sqrt(static_cast<double>(d));
  const double *softcap = op.optAttr<double>("softcap");
  const int64_t *window = op.optAttr<int64_t>("window");
  scores = b.node("Mul", {scores, b.f32Scalar(static_cast<float>(scale))});
  if (softcap) {
    std::string c = b.f32Scalar(static_cast<float>(*softcap));
    scores = b.node("Mul", {b.node("Tanh", {b.node("Div", {scores, c})}), c});
  }
  if (op.hasAttr("alibi"))
    scores = b.node("Add", {scores, alibiBias(op, storageOf(op.getOperand(1)),
                                              hk, groups)});
  if (op.hasOperand("relative_bias"))
    scores = b.node(
        "Add",
        {scores, relativeBias(op, q, storageOf(op.getOperand(1)), hk, groups)});
  if (const ir::Value *bias = op.operand("bias")) {
    // [B or 1, H, S, T] viewed [B or 1, Hkv, G, S, T] (query head h = kv
    // head * G + g).
    std::string shape = b.node("Shape", {in(bias)});
    std::string grouped = b.node(
        "Reshape",
        {in(bias), b.node("Concat",
                          {b.node("Slice", {shape, b.i64({0}), b.i64({1})}),
                           b.i64({hk, groups}),
                           b.node("Slice", {shape, b.i64({2}), b.i64({4})})},
                          {OnnxAttr::integer("axis", 0)})});
    scores = b.node("Add", {scores, widen(grouped)});
  }
  const int64_t *chunk = op.optAttr<int64_t>("chunk");
  std::string allowed = allowedMask(op, q, storageOf(op.getOperand(1)), 2,
                                    window ? *window : 0, chunk ? *chunk : 0);
  scores = b.node("Where", {allowed, scores, b.f32Scalar(-FLT_MAX)});
  // Extra keys at the same positions (compressed entries): causal and
  // padding masks without the window, and the op's extra mask.
  std::string extraV, keyLen, extraLen;
  if (const ir::Value *ek = op.operand("extra_k")) {
    const ir::Value *ev = op.operand("extra_v");
    extraV = storageOf(ev);
    GroupedDims extraDims = dims;
    extraDims.total = ek->type.dims[1];
    std::string extra = groupedScores(q4, storageOf(ek), extraDims);
    extra = b.node("Mul", {extra, b.f32Scalar(static_cast<float>(scale))});
    if (softcap) {
      std::string c = b.f32Scalar(static_cast<float>(*softcap));
      extra = b.node("Mul", {b.node("Tanh", {b.node("Div", {extra, c})}), c});
    }
    std::string seen = allowedMask(op, q, storageOf(ek), 2, 0);
    if (const ir::Value *em = op.operand("extra_mask")) {
      std::vector<int64_t> axes = em->type.rank() == 2
                                      ? std::vector<int64_t>{1, 2, 3}
                                      : std::vector<int64_t>{1, 2};
      seen = b.node("And", {seen, b.node("Unsqueeze", {in(em), b.i64(axes)})});
    }
    extra = b.node("Where", {seen, extra, b.f32Scalar(-FLT_MAX)});
    keyLen = dimTensor(dims.total);
    if (keyLen.empty())
      keyLen = b.node("Slice", {b.node("Shape", {scores}), b.i64({-1}),
                                b.i64({INT64_MAX})});
    extraLen = dimTensor(extraDims.total);
    if (extraLen.empty())
      extraLen = b.node(
          "Slice", {b.node("Shape", {extra}), b.i64({-1}), b.i64({INT64_MAX})});
    scores = b.node("Concat", {scores, extra}, {OnnxAttr::integer("axis", -1)});
  }
  std::string probs;
  if (const ir::Value *sinkValue = op.operand("sinks")) {
    // One extra logit per head in the softmax denominator, then dropped.
    std::string sinks = widen(in(sinkValue));
    std::string sink5 =
        b.node("Reshape", {sinks, b.i64({1, hk, groups, 1, 1})});
    std::string sinkShape =
        sharedShape({dims.batch, hk, groups, dims.seq, ir::SymExpr(1)});
    if (sinkShape.empty())
      sinkShape = b.node("Concat",
                         {b.node("Slice", {b.node("Shape", {scores}),
                                           b.i64({0}), b.i64({-1})}),
                          b.i64({1})},
                         {OnnxAttr::integer("axis", 0)});
    std::string col = b.node("Expand", {sink5, sinkShape});
    std::string all =
        b.node("Concat", {scores, col}, {OnnxAttr::integer("axis", -1)});
    std::string p = b.node("Softmax", {all}, {OnnxAttr::integer("axis", -1)});
    probs = b.node("Slice", {p, b.i64({0}), b.i64({-1}), b.i64({-1})});
  } else {
    probs = b.node("Softmax", {scores}, {OnnxAttr::integer("axis", -1)});
  }
  std::string o;
  if (!extraV.empty()) {
    std::vector<std::string> parts =
        b.nodeN("Split",
                {probs, b.node("Concat", {keyLen, extraLen},
                               {OnnxAttr::integer("axis", 0)})},
                {OnnxAttr::integer("axis", -1)}, 2);
    GroupedDims extraDims = dims;
    extraDims.total = op.operand("extra_k")->type.dims[1];
    o = b.node("Add",
               {groupedValues(parts[0], storageOf(op.getOperand(2)), dims),
                groupedValues(parts[1], extraV, extraDims)});
  } else {
    o = groupedValues(probs, storageOf(op.getOperand(2)), dims);
  }
  // [B, Hkv, G * S, Dv] -> [B, H, S, Dv] -> [B, S, H, Dv]
  o = b.node("Reshape", {o, b.i64({0, h, -1, dv})});
  def(op.getResult(),
      b.node("Transpose", {o}, {OnnxAttr::list("perm", {0, 2, 1, 3})}));
  return true;
}

} // namespace archc
