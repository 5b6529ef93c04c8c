//===- LowerRecurrent.cpp - ONNX lowering of linear-attention state ops ---===//
//
// This file lowers the ops that own a constant-size decode state:
//   causal_conv1d: the past state (last K - 1 inputs, [B, C, K - 1]) is
//       concatenated in front of the new inputs and a depthwise Conv
//       (group = C) without padding runs over them; the present state is the
//       last K - 1 columns. Without a past state the Conv pads K - 1 zeros.
//   delta_rule: an ONNX Scan over the sequence carries the float32 state
//       S [B, Hv, dk, dv]; per token
//         S <- exp(g) S;  d = beta (v - Sᵀk);  S <- S + k dᵀ;  o = Sᵀq
//       (key heads are repeated to the value heads first, head i reading
//       key head i / (Hv / Hk)). Exact; its cost is linear in the prompt.
// Padding tokens (attention_mask = 0) leave both states untouched: their
// conv inputs are zeroed and their delta-rule gate and decay are neutral.
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"

#include <climits>
#include <limits>

namespace archc {

namespace {
constexpr int32_t kF32 = onnx::TensorProto_DataType_FLOAT;
} // namespace

std::string OnnxLowering::newTokenMask(const ir::Op &op, const std::string &x) {
  const ir::Value *mask = op.operand("mask");
  if (!mask)
    return "";
  // attention_mask [B, past + S]: the new tokens are its last S columns.
  std::string s =
      b.node("Slice", {b.node("Shape", {x}), b.i64({1}), b.i64({2})});
  std::string m = b.node(
      "Slice", {in(mask), b.node("Neg", {s}), b.i64({INT64_MAX}), b.i64({1})});
  return b.node("Unsqueeze",
                {b.node("Cast", {m}, {OnnxAttr::integer("to", act)}),
                 b.i64({-1})}); // [B, S, 1]
}

bool OnnxLowering::lowerCausalConv(const ir::Op &op) {
  std::string x = in(op.getOperand(0)); // [B, S, C]
  const ir::TensorType &wt = op.getOperand(1)->type;
  int64_t channels = wt.dims[0].getConstant().value_or(0);
  int64_t kernel = wt.dims.back().getConstant().value_or(0);
  std::string w = in(op.getOperand(1));
  if (wt.rank() == 2)
    w = b.node("Unsqueeze", {w, b.i64({1})}); // [C, 1, K]
  std::string mask = newTokenMask(op, x);
  if (!mask.empty())
    x = b.node("Mul", {x, mask});
  std::string xt =
      b.node("Transpose", {x}, {OnnxAttr::list("perm", {0, 2, 1})});
  std::vector<OnnxAttr> attrs = {OnnxAttr::integer("group", channels),
                                 OnnxAttr::list("kernel_shape", {kernel})};
  // ONNX Conv has no bfloat16 kernel type: such models convolve in float32.
  bool viaF32 = act == onnx::TensorProto_DataType_BFLOAT16;
  auto convIn = [&](const std::string &t) { return viaF32 ? widen(t) : t; };
  std::string y;
  if (const ir::Value *pastValue = op.operand("past")) {
    std::string past = in(pastValue); // [B, C, K - 1]
    std::string full =
        b.node("Concat", {past, xt}, {OnnxAttr::integer("axis", 2)});
    y = b.node("Conv", {convIn(full), convIn(w)}, attrs);
    int64_t start = kernel > 1 ? -(kernel - 1) : INT64_MAX;
    def(op.getResult(1), b.node("Slice", {full, b.i64({start}),
                                          b.i64({INT64_MAX}), b.i64({2})}));
  } else {
    attrs.push_back(OnnxAttr::list("pads", {kernel - 1, 0}));
    y = b.node("Conv", {convIn(xt), convIn(w)}, attrs);
  }
  if (viaF32)
    y = narrow(y);
  def(op.getResult(0),
      b.node("Transpose", {y}, {OnnxAttr::list("perm", {0, 2, 1})}));
  return true;
}

bool OnnxLowering::lowerDeltaRule(const ir::Op &op) {
  const ir::TensorType &kt = op.getOperand(1)->type;
  const ir::TensorType &vt = op.getOperand(2)->type;
  int64_t hk = kt.dims[2].getConstant().value_or(0);
  int64_t dk = kt.dims[3].getConstant().value_or(0);
  int64_t hv = vt.dims[2].getConstant().value_or(0);
  int64_t dv = vt.dims[3].getConstant().value_or(0);
  std::string q = widen(in(op.getOperand(0)));
  std::string k = widen(in(op.getOperand(1)));
  std::string v = widen(in(op.getOperand(2)));
  std::string g = widen(in(op.getOperand(3)));
  std::string beta = widen(in(op.getOperand(4)));
  std::string mask = newTokenMask(op, in(op.getOperand(2)));
  if (!mask.empty()) {
    // A padding token neither decays nor updates the state.
    std::string m = widen(mask);
    g = b.node("Mul", {g, m});
    beta = b.node("Mul", {beta, m});
  }
  if (hv != hk) {
    // [B, S, Hk, dk] -> [B, S, Hk, r, dk] -> [B, S, Hv, dk]
    auto repeat = [&](const std::string &x) {
      std::string x5 = b.node("Unsqueeze", {x, b.i64({3})});
      std::string shape = b.node(
          "Concat",
          {b.node("Slice", {b.node("Shape", {x}), b.i64({0}), b.i64({2})}),
           b.i64({hk, hv / hk, dk})},
          {OnnxAttr::integer("axis", 0)});
      return b.node("Reshape",
                    {b.node("Expand", {x5, shape}), b.i64({0, 0, hv, dk})});
    };
    q = repeat(q);
    k = repeat(k);
  }
  std::string state;
  if (const ir::Value *past = op.operand("past")) {
    state = in(past);
  } else {
    std::string batch =
        b.node("Slice", {b.node("Shape", {v}), b.i64({0}), b.i64({1})});
    std::string shape = b.node("Concat", {batch, b.i64({hv, dk, dv})},
                               {OnnxAttr::integer("axis", 0)});
    onnx::TensorProto zero;
    zero.set_data_type(kF32);
    zero.add_dims(1);
    zero.add_float_data(0.0f);
    onnx::NodeProto *n = b.proto().add_node();
    n->set_op_type("ConstantOfShape");
    state = b.fresh("zero_state");
    n->set_name(state);
    n->add_input(shape);
    n->add_output(state);
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto_AttributeType_TENSOR);
    *a->mutable_t() = zero;
  }

  // The Scan body: one token.
  onnx::GraphProto body;
  body.set_name(b.fresh("delta_rule_step"));
  GraphBuilder s(body, body.name() + "_");
  std::string sIn = s.fresh("state"), qIn = s.fresh("q"), kIn = s.fresh("k"),
              vIn = s.fresh("v"), gIn = s.fresh("g"), bIn = s.fresh("beta");
  for (const std::string &n : {sIn, qIn, kIn, vIn, gIn, bIn})
    addGraphInput(body, n, kF32);
  // S [B, Hv, dk, dv]; q_t, k_t [B, Hv, dk]; v_t [B, Hv, dv]; g_t, b_t [B, Hv]
  std::string decay =
      s.node("Unsqueeze", {s.node("Exp", {gIn}), s.i64({2, 3})});
  std::string s1 = s.node("Mul", {sIn, decay});
  std::string kRow = s.node("Unsqueeze", {kIn, s.i64({2})}); // [B, Hv, 1, dk]
  std::string mem = s.node("MatMul", {kRow, s1});            // [B, Hv, 1, dv]
  std::string delta = s.node(
      "Mul", {s.node("Sub", {s.node("Unsqueeze", {vIn, s.i64({2})}), mem}),
              s.node("Unsqueeze", {bIn, s.i64({2, 3})})});
  std::string kCol =
      s.node("Transpose", {kRow}, {OnnxAttr::list("perm", {0, 1, 3, 2})});
  std::string s2 = s.node("Add", {s1, s.node("MatMul", {kCol, delta})});
  std::string o =
      s.node("Squeeze",
             {s.node("MatMul", {s.node("Unsqueeze", {qIn, s.i64({2})}), s2}),
              s.i64({2})}); // [B, Hv, dv]
  std::string sOut = s.fresh("state_out"), oOut = s.fresh("o");
  s.nodeNamed("Identity", {s2}, sOut);
  s.nodeNamed("Identity", {o}, oOut);
  addGraphOutput(body, sOut, kF32);
  addGraphOutput(body, oOut, kF32);

  std::vector<std::string> outs =
      b.nodeN("Scan", {state, q, k, v, g, beta},
              {OnnxAttr::graph("body", std::move(body)),
               OnnxAttr::integer("num_scan_inputs", 5),
               OnnxAttr::list("scan_input_axes", {1, 1, 1, 1, 1}),
               OnnxAttr::list("scan_output_axes", {1})},
              2, "delta_rule");
  def(op.getResult(0), narrow(outs[1])); // [B, S, Hv, dv]
  if (const ir::Value *present = op.result("present"))
    def(present, outs[0]);
  return true;
}

} // namespace archc

namespace archc {

// compress: the state holds the kv | gate inputs of the last W - 1 tokens
// (W = ratio, 2 ratio with overlap), float32. Prepended to the new tokens it
// gives every new token its window of W inputs (a Gather of [S, W]
// positions); the entry of a token that closes a window (its count of real
// tokens, from the padding mask, is a multiple of ratio) is the per-channel
// softmax of gate + ape over the window weighting kv; with overlap the
// first ratio slots use the first half of the channels (the previous
// window, absent for the first one) and the last ratio slots the second
// half. Other tokens give zeros.
bool OnnxLowering::lowerCompress(const ir::Op &op) {
  const ir::TensorType &kt = op.getOperand(0)->type;
  int64_t channels = kt.dims[2].getConstant().value_or(0);
  int64_t ratio = op.attr<int64_t>("ratio");
  bool overlap = op.attr<bool>("overlap");
  int64_t window = overlap ? 2 * ratio : ratio;
  auto f32 = [&](const ir::Value *v) {
    return v->type.dtype == ir::DType::F32 ? in(v) : castTo(in(v), kF32);
  };
  std::string kv = f32(op.getOperand(0)), gate = f32(op.getOperand(1));
  std::string ape = f32(op.getOperand(2));
  std::string cur =
      b.node("Concat", {kv, gate}, {OnnxAttr::integer("axis", -1)});
  // Batch and new tokens from the graph's symbols (shared by every layer,
  // so the window indices and counts below are built once), else from kv.
  std::string batch = dimTensor(kt.dims[0]), seq = dimTensor(kt.dims[1]);
  if (batch.empty() || seq.empty()) {
    std::string shape = b.node("Shape", {kv});
    batch = b.node("Slice", {shape, b.i64({0}), b.i64({1})});
    seq = b.node("Slice", {shape, b.i64({1}), b.i64({2})});
  }
  std::string state;
  if (const ir::Value *past = op.operand("past")) {
    state = in(past);
  } else {
    state = b.node("ConstantOfShape",
                   {b.node("Concat", {batch, b.i64({window - 1, 2 * channels})},
                           {OnnxAttr::integer("axis", 0)})});
  }
  std::string full =
      b.node("Concat", {state, cur}, {OnnxAttr::integer("axis", 1)});
  if (const ir::Value *present = op.result("present"))
    def(present, b.node("Slice", {full, b.i64({-(window - 1)}),
                                  b.i64({INT64_MAX}), b.i64({1})}));
  // Real-token counts: position r of each new token among its row's real
  // tokens (the padding mask's running sum), and the closing tokens.
  std::string seqS = b.node("Squeeze", {seq, b.i64({0})});
  std::string r, closing, valid;
  auto closes = [&](const std::string &count) {
    return b.node("Equal",
                  {b.node("Mod", {count, b.i64Scalar(ratio)}), b.i64Scalar(0)});
  };
  if (const ir::Value *maskValue = op.operand("mask")) {
    std::string mask = in(maskValue); // [B, T]
    std::string isReal =
        b.node("Cast", {mask},
               {OnnxAttr::integer("to", onnx::TensorProto_DataType_BOOL)});
    std::string count = b.node("CumSum", {mask, b.i64Scalar(1)});
    valid = b.node("And", {isReal, closes(count)});
    std::string negS = b.node("Neg", {seq});
    std::string countNew =
        b.node("Slice", {count, negS, b.i64({INT64_MAX}), b.i64({1})});
    r = b.node("Sub", {countNew, b.i64Scalar(1)});
    closing = b.node("Slice", {valid, negS, b.i64({INT64_MAX}), b.i64({1})});
  } else {
    if (op.hasOperand("past"))
      return fail(op, "a past state needs the padding mask (run kv-cache)");
    r = b.node("Range", {b.i64Scalar(0), seqS, b.i64Scalar(1)}); // [S]
    closing = closes(b.node("Add", {r, b.i64Scalar(1)}));
    valid = b.node("Expand", {b.node("Unsqueeze", {closing, b.i64({0})}),
                              b.node("Concat", {batch, seq},
                                     {OnnxAttr::integer("axis", 0)})});
  }
  def(op.getResult(1), valid);
  // Windows: new token t reads full[t .. t + W - 1] (its W - 1 predecessors
  // and itself).
  std::string idx = b.node(
      "Add", {b.node("Unsqueeze",
                     {b.node("Range", {b.i64Scalar(0), seqS, b.i64Scalar(1)}),
                      b.i64({1})}),
              b.node("Unsqueeze",
                     {b.node("Range", {b.i64Scalar(0), b.i64Scalar(window),
                                       b.i64Scalar(1)}),
                      b.i64({0})})}); // [S, W]
  std::string win =
      b.node("Gather", {full, idx}, {OnnxAttr::integer("axis", 1)});
  // win [B, S, W, 2C]: kv channels, then gate channels.
  std::string values, gates;
  if (overlap) {
    int64_t d = channels / 2;
    // Window slots w0 .. w0 + ratio of channels c0 .. c0 + d.
    auto part = [&](int64_t w0, int64_t c0) {
      return b.node("Slice", {win, b.i64({w0, c0}), b.i64({w0 + ratio, c0 + d}),
                              b.i64({2, 3})});
    };
    auto apePart = [&](int64_t c0) {
      return b.node("Slice", {ape, b.i64({c0}), b.i64({c0 + d}), b.i64({1})});
    };
    std::string gA = b.node("Add", {part(0, channels), apePart(0)});
    std::string gB = b.node("Add", {part(ratio, channels + d), apePart(d)});
    // The previous window exists from the second window on.
    std::string hasPrev = b.node(
        "Unsqueeze", {b.node("GreaterOrEqual", {r, b.i64Scalar(2 * ratio - 1)}),
                      b.i64({-1, -2})});
    gA =
        b.node("Where", {hasPrev, gA,
                         b.f32Scalar(-std::numeric_limits<float>::infinity())});
    values = b.node("Concat", {part(0, 0), part(ratio, d)},
                    {OnnxAttr::integer("axis", 2)});
    gates = b.node("Concat", {gA, gB}, {OnnxAttr::integer("axis", 2)});
  } else {
    values = b.node("Slice", {win, b.i64({0}), b.i64({channels}), b.i64({3})});
    gates = b.node("Add", {b.node("Slice", {win, b.i64({channels}),
                                            b.i64({2 * channels}), b.i64({3})}),
                           ape}); // [B, S, W, C]
  }
  std::string p = b.node("Softmax", {gates}, {OnnxAttr::integer("axis", 2)});
  std::string pooled =
      b.node("ReduceSum", {b.node("Mul", {p, values}), b.i64({2})},
             {OnnxAttr::integer("keepdims", 0)}); // [B, S, d]
  std::string entries =
      b.node("Where", {b.node("Unsqueeze", {closing, b.i64({-1})}), pooled,
                       b.f32Scalar(0.0f)});
  def(op.getResult(0),
      kt.dtype == ir::DType::F32
          ? entries
          : castTo(entries, onnxDType(ir::dtypeName(kt.dtype))));
  return true;
}

} // namespace archc
