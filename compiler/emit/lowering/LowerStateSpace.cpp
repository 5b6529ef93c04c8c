//===- LowerStateSpace.cpp - ONNX lowering of the state-space scans -------===//
//
// This file lowers the Mamba scans, both in float32 with the state in
// float32 ([B, C, N] for Mamba-1, [B, H, P, N] for Mamba-2):
//   selective_scan: an ONNX Scan over the tokens; per token
//         h <- exp(dt A) h + (dt x) B^T;  y = h C
//       (A is [C, N], so every channel and state element has its own decay:
//       no chunked shortcut without a [chunk, chunk, C, N] tensor).
//   ssd_scan: the chunked state-space-duality form. The tokens are padded
//       to whole chunks of q = min(S, chunk, kOnnxChunk) (padding has dt = 0:
//       no decay, no update) and an ONNX Scan runs over the chunks; per
//       chunk, with
//       cum the running sum of dt A within the chunk,
//         y_i = sum_{j <= i} exp(cum_i - cum_j) (C_i . B_j) dt_j x_j
//               + exp(cum_i) C_i . h
//         h  <- exp(cum_q) h + sum_j exp(cum_q - cum_j) dt_j x_j B_j^T
//       Exact (every exponent is <= 0), linear in the prompt length for a
//       fixed chunk, and a decode step (q = 1) is one state update.
// Padding tokens (attention_mask = 0) get dt = 0, so they neither decay nor
// update the state.
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"

#include "ir/OpRules.h"

#include <algorithm>
#include <climits>
#include <limits>

namespace archc {

namespace {
constexpr int32_t kF32 = onnx::TensorProto_DataType_FLOAT;
/// The longest SSD chunk the ONNX graph uses. The result is exact for any
/// chunk length; the intra-chunk work per token grows with it and the
/// per-chunk Scan overhead shrinks: on ONNX Runtime's CPU provider 32-64
/// tokens are fastest, 256 (the usual chunk_size, tuned for GPU kernels)
/// is 2.6x slower (bench/ssm_scaling.js, docs/performance.md).
constexpr int64_t kOnnxChunk = 64;

void addTensorIO(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> *io,
                 const std::string &name) {
  onnx::ValueInfoProto *vi = io->Add();
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(kF32);
}

int64_t constDim(const ir::SymExpr &d) { return d.getConstant().value_or(0); }
} // namespace

bool OnnxLowering::lowerStateSpace(const ir::Op &op) {
  auto f32 = [&](const ir::Value *v) {
    return v->type.dtype == ir::DType::F32 ? in(v) : castTo(in(v), kF32);
  };
  const ir::TensorType &xt = op.getOperand(0)->type;
  std::string x = f32(op.getOperand(0));
  std::string dt = f32(op.getOperand(1));
  std::string a = f32(op.getOperand(2));
  std::string bm = f32(op.getOperand(3));
  std::string cm = f32(op.getOperand(4));
  std::string mask = newTokenMask(op, in(op.getOperand(0)));
  if (!mask.empty()) // padding: dt = 0 (no decay, no update)
    dt = b.node("Mul", {dt, widen(mask)});
  std::string batch =
      b.node("Slice", {b.node("Shape", {x}), b.i64({0}), b.i64({1})});
  ir::TensorType stateType;
  ir::recurrentStateType(op, stateType);
  std::string state;
  if (const ir::Value *past = op.operand("past")) {
    state = in(past);
  } else {
    std::vector<int64_t> rest;
    for (size_t i = 1; i < stateType.rank(); ++i)
      rest.push_back(constDim(stateType.dims[i]));
    state = b.node("ConstantOfShape",
                   {b.node("Concat", {batch, b.i64(rest)},
                           {OnnxAttr::integer("axis", 0)})},
                   {}, "zero_state");
  }

  onnx::GraphProto body;
  std::string y, present;
  if (op.getKind() == ir::OpKind::SelectiveScan) {
    // One token per step: x_t, dt_t [B, C], B_t, C_t [B, N], h [B, C, N].
    body.set_name(b.fresh("selective_scan_step"));
    GraphBuilder s(body, body.name() + "_");
    std::string hIn = s.fresh("h"), xIn = s.fresh("x"), dtIn = s.fresh("dt"),
                bIn = s.fresh("b"), cIn = s.fresh("c");
    for (const std::string &n : {hIn, xIn, dtIn, bIn, cIn})
      addTensorIO(body.mutable_input(), n);
    std::string decay =
        s.node("Exp", {s.node("Mul", {s.node("Unsqueeze", {dtIn, s.i64({2})}),
                                      a})}); // A from the outer scope
    std::string update = s.node(
        "Mul", {s.node("Unsqueeze", {s.node("Mul", {dtIn, xIn}), s.i64({2})}),
                s.node("Unsqueeze", {bIn, s.i64({1})})});
    std::string h2 = s.node("Add", {s.node("Mul", {hIn, decay}), update});
    std::string yt =
        s.node("Squeeze",
               {s.node("MatMul", {h2, s.node("Unsqueeze", {cIn, s.i64({2})})}),
                s.i64({2})});
    std::string hOut = s.fresh("h_out"), yOut = s.fresh("y");
    s.nodeNamed("Identity", {h2}, hOut);
    s.nodeNamed("Identity", {yt}, yOut);
    addTensorIO(body.mutable_output(), hOut);
    addTensorIO(body.mutable_output(), yOut);
    std::vector<std::string> outs =
        b.nodeN("Scan", {state, x, dt, bm, cm},
                {OnnxAttr::graph("body", std::move(body)),
                 OnnxAttr::integer("num_scan_inputs", 4),
                 OnnxAttr::list("scan_input_axes", {1, 1, 1, 1}),
                 OnnxAttr::list("scan_output_axes", {1})},
                2, "selective_scan");
    present = outs[0];
    y = outs[1]; // [B, S, C]
  } else {
    int64_t heads = constDim(xt.dims[2]), p = constDim(xt.dims[3]);
    const ir::TensorType &bt = op.getOperand(3)->type;
    int64_t groups = constDim(bt.dims[2]), n = constDim(bt.dims[3]);
    int64_t r = heads / groups;
    int64_t chunk = std::min(op.attr<int64_t>("chunk"), kOnnxChunk);
    // Chunk length q = min(S, chunk), chunks nc = ceil(S / q), padding.
    std::string seq =
        b.node("Slice", {b.node("Shape", {x}), b.i64({1}), b.i64({2})});
    std::string q = b.node("Min", {seq, b.i64({chunk})});
    std::string nc = b.node(
        "Div", {b.node("Sub", {b.node("Add", {seq, q}), b.i64({1})}), q});
    std::string pad = b.node("Sub", {b.node("Mul", {nc, q}), seq});
    auto padSeq = [&](const std::string &t, size_t rank) {
      std::vector<std::string> pads;
      pads.push_back(b.i64(std::vector<int64_t>(rank + 1, 0)));
      pads.push_back(pad);
      pads.push_back(b.i64(std::vector<int64_t>(rank - 2, 0)));
      return b.node(
          "Pad", {t, b.node("Concat", pads, {OnnxAttr::integer("axis", 0)})});
    };
    auto chunked = [&](const std::string &t, size_t rank,
                       std::vector<int64_t> tail) {
      std::string shape = b.node("Concat", {b.i64({0, -1}), q, b.i64(tail)},
                                 {OnnxAttr::integer("axis", 0)});
      return b.node("Reshape", {padSeq(t, rank), shape});
    };
    std::string xc = chunked(x, 4, {heads, p});   // [B, nc, q, H, P]
    std::string dtc = chunked(dt, 3, {heads});    // [B, nc, q, H]
    std::string bc = chunked(bm, 4, {groups, n}); // [B, nc, q, G, N]
    std::string cc = chunked(cm, 4, {groups, n});

    body.set_name(b.fresh("ssd_chunk"));
    GraphBuilder s(body, body.name() + "_");
    std::string hIn = s.fresh("h"), xIn = s.fresh("x"), dtIn = s.fresh("dt"),
                bIn = s.fresh("b"), cIn = s.fresh("c");
    for (const std::string &nm : {hIn, xIn, dtIn, bIn, cIn})
      addTensorIO(body.mutable_input(), nm);
    auto perm = [&](const std::string &t, std::vector<int64_t> order) {
      return s.node("Transpose", {t}, {OnnxAttr::list("perm", order)});
    };
    auto shape = [&](std::vector<std::string> parts) {
      return s.node("Concat", parts, {OnnxAttr::integer("axis", 0)});
    };
    auto reshape = [&](const std::string &t, const std::string &to) {
      return s.node("Reshape", {t, to});
    };
    // q of this chunk, as [1] and as a scalar.
    std::string qv =
        s.node("Slice", {s.node("Shape", {dtIn}), s.i64({1}), s.i64({2})});
    std::string qs = s.node("Squeeze", {qv, s.i64({0})});
    std::string dtT = perm(dtIn, {0, 2, 1}); // [B, H, q]
    // A [H] from the outer scope; cum [B, H, q] is <= 0 and decreasing.
    std::string cum = s.node(
        "CumSum", {perm(s.node("Mul", {dtIn, a}), {0, 2, 1}), s.i64Scalar(2)});
    // Intra-chunk: L[i, j] = exp(cum_i - cum_j) for j <= i, else 0.
    std::string idx = s.node("Range", {s.i64Scalar(0), qs, s.i64Scalar(1)});
    std::string causal =
        s.node("GreaterOrEqual", {s.node("Unsqueeze", {idx, s.i64({1})}),
                                  s.node("Unsqueeze", {idx, s.i64({0})})});
    std::string seg = s.node("Sub", {s.node("Unsqueeze", {cum, s.i64({3})}),
                                     s.node("Unsqueeze", {cum, s.i64({2})})});
    std::string lmat = s.node(
        "Exp",
        {s.node("Where",
                {causal, seg,
                 s.f32Scalar(-std::numeric_limits<float>::infinity())})});
    std::string grh = s.i64({0, groups, r});
    std::string l5 = reshape(lmat, shape({grh, qv, qv})); // [B, G, r, q, q]
    std::string ct = perm(cIn, {0, 2, 1, 3});             // [B, G, q, N]
    std::string btq = perm(bIn, {0, 2, 1, 3});            // [B, G, q, N]
    std::string cb = s.node("MatMul", {ct, perm(bIn, {0, 2, 3, 1})});
    std::string dt5 = reshape(dtT, shape({s.i64({0, groups, r, 1}), qv}));
    std::string m = s.node(
        "Mul", {s.node("Mul", {l5, s.node("Unsqueeze", {cb, s.i64({2})})}),
                dt5}); // [B, G, r, q, q]
    std::string x5 = reshape(perm(xIn, {0, 2, 1, 3}),
                             shape({grh, qv, s.i64({p})})); // [B, G, r, q, P]
    std::string ydiag = s.node("MatMul", {m, x5});
    // Inter-chunk: exp(cum_i) C_i . h.
    std::string h5 = reshape(hIn, s.i64({0, groups, r, p, n}));
    std::string coff =
        s.node("MatMul", {s.node("Unsqueeze", {ct, s.i64({2})}),
                          perm(h5, {0, 1, 2, 4, 3})}); // [B, G, r, q, P]
    std::string ec5 =
        reshape(s.node("Exp", {cum}), shape({grh, qv, s.i64({1})}));
    std::string y5 = s.node("Add", {ydiag, s.node("Mul", {coff, ec5})});
    std::string yq =
        perm(reshape(y5, shape({s.i64({0, heads}), qv, s.i64({p})})),
             {0, 2, 1, 3}); // [B, q, H, P]
    // State: exp(cum_q) h + sum_j exp(cum_q - cum_j) dt_j x_j B_j^T.
    std::string last = s.node(
        "Slice", {cum, s.i64({-1}), s.i64({INT64_MAX}), s.i64({2})}); // [B,H,1]
    std::string w = s.node(
        "Mul", {s.node("Exp", {s.node("Sub", {last, cum})}), dtT}); // [B,H,q]
    std::string xw =
        s.node("Mul", {x5, reshape(w, shape({grh, qv, s.i64({1})}))});
    std::string upd = s.node(
        "MatMul", {perm(xw, {0, 1, 2, 4, 3}),
                   s.node("Unsqueeze", {btq, s.i64({2})})}); // [B,G,r,P,N]
    std::string decay =
        s.node("Unsqueeze", {s.node("Exp", {last}), s.i64({3})}); // [B,H,1,1]
    std::string h2 = s.node("Add", {s.node("Mul", {hIn, decay}),
                                    reshape(upd, s.i64({0, heads, p, n}))});
    std::string hOut = s.fresh("h_out"), yOut = s.fresh("y");
    s.nodeNamed("Identity", {h2}, hOut);
    s.nodeNamed("Identity", {yq}, yOut);
    addTensorIO(body.mutable_output(), hOut);
    addTensorIO(body.mutable_output(), yOut);
    std::vector<std::string> outs =
        b.nodeN("Scan", {state, xc, dtc, bc, cc},
                {OnnxAttr::graph("body", std::move(body)),
                 OnnxAttr::integer("num_scan_inputs", 4),
                 OnnxAttr::list("scan_input_axes", {1, 1, 1, 1}),
                 OnnxAttr::list("scan_output_axes", {1})},
                2, "ssd_scan");
    present = outs[0];
    // [B, nc, q, H, P] -> [B, nc q, H, P] -> the first S tokens.
    std::string flat = b.node("Reshape", {outs[1], b.i64({0, -1, heads, p})});
    y = b.node("Slice", {flat, b.i64({0}), seq, b.i64({1})});
  }
  def(op.getResult(0), narrowTo(y, xt.dtype));
  if (const ir::Value *p = op.result("present"))
    def(p, present);
  return true;
}

} // namespace archc
