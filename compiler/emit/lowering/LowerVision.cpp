//===- LowerVision.cpp - ONNX lowering of vision and multimodal ops -------===//
//
// This file lowers the Vision family and the multimodal parts of rope and
// attention:
//   conv2d             Conv (kernel = the weight's, no padding)
//   equal              Equal
//   expand             Expand
//   scatter_rows       NonZero of the mask, ScatterND (with `accumulate`
//                      the rows GatherND-ed and added first; without, zero
//                      rows keep the masked rows)
//   nonzero_rows       Not(Equal(x, 0)) reduced per row; row 0 when none
//   select_rows        Compress along axis 0
//   patch_*            per-patch integer arithmetic on image_grid_thw: the
//                      image of each patch by comparison with the running
//                      patch counts, then frame, merge block and position
//                      inside the block; windows and bilinear weights from
//                      those (float32, as Hugging Face computes them)
//   bucket_positions   integer buckets from the real rows/columns counts
//   M-RoPE             per-axis position x frequency products, each
//                      frequency taking its axis's (one-hot weights summed)
//   attention masks    key_mask and segments And-ed into the allowed
//                      (query, key) pairs, bidirectional image runs Or-ed
//                      into the causal/window rule (before the padding mask)
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"

#include "ir/OpRules.h"

namespace archc {

using ir::OpKind;

namespace {
constexpr int32_t kI64 = onnx::TensorProto_DataType_INT64;
constexpr int32_t kF32 = onnx::TensorProto_DataType_FLOAT;
constexpr int32_t kBool = onnx::TensorProto_DataType_BOOL;
} // namespace

/// Per-patch quantities of flattened-patch inputs (Qwen-VL's
/// image_grid_thw): every name is an int64 tensor [P].
struct PatchGrid {
  std::string image, frame, row, col, height, width, blockRow, blockCol;
  std::string frameBase; ///< global index of the image's first frame
};

static PatchGrid patchGrid(GraphBuilder &b, const std::string &grid32,
                           const std::string &patches, int64_t merge) {
  auto axis0 = [](int64_t a) { return OnnxAttr::integer("axis", a); };
  std::string grid = b.node("Cast", {grid32}, {OnnxAttr::integer("to", kI64)});
  auto column = [&](int64_t c) {
    return b.node("Gather", {grid, b.i64Scalar(c)}, {axis0(1)});
  };
  std::string t = column(0), h = column(1), w = column(2);
  std::string perFrame = b.node("Mul", {h, w});
  std::string count = b.node("Mul", {t, perFrame});
  std::string ends = b.node("CumSum", {count, b.i64Scalar(0)});
  std::string starts = b.node("Sub", {ends, count});
  std::string total = b.node(
      "Gather", {b.node("Shape", {patches}), b.i64Scalar(0)}, {axis0(0)});
  std::string p = b.node("Range", {b.i64Scalar(0), total, b.i64Scalar(1)});
  // The image of patch p: how many images end at or before p.
  std::string done =
      b.node("GreaterOrEqual", {b.node("Unsqueeze", {p, b.i64({1})}),
                                b.node("Unsqueeze", {ends, b.i64({0})})});
  PatchGrid g;
  g.image = b.node(
      "ReduceSum",
      {b.node("Cast", {done}, {OnnxAttr::integer("to", kI64)}), b.i64({1})},
      {OnnxAttr::integer("keepdims", 0)});
  auto ofImage = [&](const std::string &perImage) {
    return b.node("Gather", {perImage, g.image}, {axis0(0)});
  };
  std::string local = b.node("Sub", {p, ofImage(starts)});
  std::string frameSize = ofImage(perFrame);
  g.height = ofImage(h);
  g.width = ofImage(w);
  g.frame = b.node("Div", {local, frameSize});
  std::string inFrame = b.node("Mod", {local, frameSize});
  std::string m = b.i64Scalar(merge), m2 = b.i64Scalar(merge * merge);
  std::string block = b.node("Div", {inFrame, m2});
  std::string within = b.node("Mod", {inFrame, m2});
  std::string blocksPerRow = b.node("Div", {g.width, m});
  g.blockRow = b.node("Div", {block, blocksPerRow});
  g.blockCol = b.node("Mod", {block, blocksPerRow});
  g.row = b.node("Add",
                 {b.node("Mul", {g.blockRow, m}), b.node("Div", {within, m})});
  g.col = b.node("Add",
                 {b.node("Mul", {g.blockCol, m}), b.node("Mod", {within, m})});
  std::string frameEnds = b.node("CumSum", {t, b.i64Scalar(0)});
  g.frameBase = ofImage(b.node("Sub", {frameEnds, t}));
  return g;
}

/// torch.linspace(0, end, steps)[i] in float32 for int64 [P] tensors `i` and
/// `steps` (values at or past the middle are computed from the end).
static std::string linspaceAt(GraphBuilder &b, const std::string &i,
                              const std::string &steps, float end) {
  auto f32 = [&](const std::string &x) {
    return b.node("Cast", {x}, {OnnxAttr::integer("to", kF32)});
  };
  std::string one = b.i64Scalar(1);
  std::string gaps = b.node("Max", {b.node("Sub", {steps, one}), one});
  std::string step = b.node("Div", {b.f32Scalar(end), f32(gaps)});
  std::string fromStart = b.node("Mul", {step, f32(i)});
  std::string rest = b.node("Sub", {b.node("Sub", {steps, i}), one});
  std::string fromEnd =
      b.node("Sub", {b.f32Scalar(end), b.node("Mul", {step, f32(rest)})});
  std::string early =
      b.node("Less", {i, b.node("Div", {steps, b.i64Scalar(2)})});
  std::string v = b.node("Where", {early, fromStart, fromEnd});
  // One step: the start.
  return b.node("Where", {b.node("Equal", {steps, one}), b.f32Scalar(0.0f), v});
}

bool OnnxLowering::lowerVision(const ir::Op &op) {
  const ir::Value *r = op.getResult();
  auto x = [&](size_t i) -> const std::string & {
    return in(op.getOperand(i));
  };
  switch (op.getKind()) {
  case OpKind::Conv2d: {
    const auto &wt = op.getOperand(1)->type;
    const auto &stride = op.attr<std::vector<int64_t>>("stride");
    std::vector<std::string> ins = {x(0), x(1)};
    if (const ir::Value *bias = op.operand("bias"))
      ins.push_back(in(bias));
    def(r, b.node("Conv", ins,
                  {OnnxAttr::list("kernel_shape",
                                  {wt.dims[2].getConstant().value_or(1),
                                   wt.dims[3].getConstant().value_or(1)}),
                   OnnxAttr::list("strides", stride)}));
    return true;
  }
  case OpKind::Equal: {
    std::vector<std::string> ins;
    for (size_t i = 0; i < 2; ++i) {
      const ir::Value *v = op.getOperand(i);
      const ir::Value *other = op.getOperand(1 - i);
      const ir::Op *c = v->getDefiningOp();
      if (v->type.rank() == 0 && c && c->getKind() == OpKind::Const &&
          v->type.dtype != other->type.dtype)
        ins.push_back(b.scalar(c->attr<double>("value"),
                               onnxDType(ir::dtypeName(other->type.dtype))));
      else
        ins.push_back(x(i));
    }
    def(r, b.node("Equal", ins));
    return true;
  }
  case OpKind::Expand: {
    std::string shape = shapeTensor(r->type.dims);
    if (shape.empty())
      return fail(op, "cannot compute the target shape");
    def(r, b.node("Expand", {x(0), shape}));
    return true;
  }
  case OpKind::ScatterRows: {
    // Positions of the mask, row-major: [n, rank].
    std::string idx = b.node("Transpose", {b.node("NonZero", {x(1)})},
                             {OnnxAttr::list("perm", {1, 0})});
    // With `accumulate`: the selected rows plus `rows`, written back (the
    // positions are distinct; ScatterND's reduction="add" has no float16
    // kernel in ONNX Runtime's CPU provider).
    std::string rows = x(2);
    if (op.attr<bool>("accumulate")) {
      rows = b.node("Add", {b.node("GatherND", {x(0), idx}), rows});
    } else {
      // Zero rows leave the masked rows as they are (a caller that merges
      // them itself, transformers.js's embed_tokens call); any other count
      // must equal the mask's, as ScatterND requires: the rows followed by
      // the current ones, cut to the row count, or to the mask's when
      // there are no rows.
      std::string kept = b.node("GatherND", {x(0), idx});
      auto count = [&](const std::string &t) {
        return b.node(
            "Shape", {t},
            {OnnxAttr::integer("start", 0), OnnxAttr::integer("end", 1)});
      };
      std::string given = count(rows);
      std::string none = b.node("Cast", {b.node("Equal", {given, b.i64({0})})},
                                {OnnxAttr::integer("to", kI64)});
      std::string len =
          b.node("Add", {given, b.node("Mul", {count(idx), none})});
      rows = b.node("Slice", {b.node("Concat", {rows, kept},
                                     {OnnxAttr::integer("axis", 0)}),
                              b.i64({0}), len, b.i64({0})});
    }
    def(r, b.node("ScatterND", {x(0), idx, rows}));
    return true;
  }
  case OpKind::NonzeroRows: {
    const ir::TensorType &t = op.getOperand(0)->type;
    std::string flat = x(0);
    if (t.rank() != 2)
      flat = b.node("Reshape",
                    {flat, b.i64(t.rank() == 1 ? std::vector<int64_t>{0, 1}
                                               : std::vector<int64_t>{0, -1})});
    std::string zero = b.scalar(0, onnxDType(ir::dtypeName(t.dtype)));
    std::string nonzero =
        b.node("Cast", {b.node("Not", {b.node("Equal", {flat, zero})})},
               {OnnxAttr::integer("to", kI64)});
    std::string any =
        b.node("ReduceMax", {nonzero},
               {OnnxAttr::list("axes", {1}), OnnxAttr::integer("keepdims", 0)});
    std::string keep = b.node("Cast", {any}, {OnnxAttr::integer("to", kBool)});
    // No row at all: keep the first.
    std::string none =
        b.node("Not", {b.node("Cast",
                              {b.node("ReduceMax", {any},
                                      {OnnxAttr::integer("keepdims", 0)})},
                              {OnnxAttr::integer("to", kBool)})});
    std::string n = b.node("Gather", {b.node("Shape", {x(0)}), b.i64Scalar(0)},
                           {OnnxAttr::integer("axis", 0)});
    std::string first =
        b.node("Equal", {b.node("Range", {b.i64Scalar(0), n, b.i64Scalar(1)}),
                         b.i64Scalar(0)});
    def(r, b.node("Or", {keep, b.node("And", {first, none})}));
    return true;
  }
  case OpKind::SelectRows: {
    std::string y =
        b.node("Compress", {x(0), x(1)}, {OnnxAttr::integer("axis", 0)});
    registerSymbols(y, r->type);
    def(r, y);
    return true;
  }
  case OpKind::PatchCoords: {
    PatchGrid g = patchGrid(b, x(0), x(1), op.attr<int64_t>("merge"));
    def(r, b.node("Concat",
                  {b.node("Unsqueeze", {g.row, b.i64({1})}),
                   b.node("Unsqueeze", {g.col, b.i64({1})})},
                  {OnnxAttr::integer("axis", 1)}));
    return true;
  }
  case OpKind::PatchSegments: {
    int64_t merge = op.attr<int64_t>("merge");
    PatchGrid g = patchGrid(b, x(0), x(1), merge);
    std::string frameId = b.node("Add", {g.frameBase, g.frame});
    const int64_t *window = op.optAttr<int64_t>("window");
    if (!window) {
      def(r, frameId);
      return true;
    }
    // Windows of `window` merge blocks per side tile each frame; ids count
    // the windows of all earlier frames of all images.
    std::string wm = b.i64Scalar(*window), m = b.i64Scalar(merge);
    auto ceilDiv = [&](const std::string &a) {
      return b.node("Div", {b.node("Add", {a, b.i64Scalar(*window - 1)}), wm});
    };
    std::string grid = b.node("Cast", {x(0)}, {OnnxAttr::integer("to", kI64)});
    auto column = [&](int64_t c) {
      return b.node("Gather", {grid, b.i64Scalar(c)},
                    {OnnxAttr::integer("axis", 1)});
    };
    std::string t = column(0);
    std::string rowsW = ceilDiv(b.node("Div", {column(1), m}));
    std::string colsW = ceilDiv(b.node("Div", {column(2), m}));
    std::string perFrame = b.node("Mul", {rowsW, colsW});
    std::string perImage = b.node("Mul", {t, perFrame});
    std::string base =
        b.node("Sub", {b.node("CumSum", {perImage, b.i64Scalar(0)}), perImage});
    auto ofImage = [&](const std::string &v) {
      return b.node("Gather", {v, g.image}, {OnnxAttr::integer("axis", 0)});
    };
    std::string inFrame = b.node(
        "Add",
        {b.node("Mul", {b.node("Div", {g.blockRow, wm}), ofImage(colsW)}),
         b.node("Div", {g.blockCol, wm})});
    def(r, b.node("Add",
                  {ofImage(base),
                   b.node("Add", {b.node("Mul", {g.frame, ofImage(perFrame)}),
                                  inFrame})}));
    return true;
  }
  case OpKind::PatchInterpolate: {
    const ir::TensorType &tt = op.getOperand(0)->type;
    int64_t n = tt.dims[0].getConstant().value_or(1), side = 0;
    while ((side + 1) * (side + 1) <= n)
      ++side;
    PatchGrid g = patchGrid(b, x(1), x(2), op.attr<int64_t>("merge"));
    float end = static_cast<float>(side - 1);
    std::string hv = linspaceAt(b, g.row, g.height, end);
    std::string wv = linspaceAt(b, g.col, g.width, end);
    auto toI64 = [&](const std::string &v) {
      return b.node("Cast", {v}, {OnnxAttr::integer("to", kI64)});
    };
    auto toF32 = [&](const std::string &v) {
      return b.node("Cast", {v}, {OnnxAttr::integer("to", kF32)});
    };
    std::string last = b.i64Scalar(side - 1), s = b.i64Scalar(side);
    std::string h0 = toI64(hv), w0 = toI64(wv);
    std::string h1 = b.node("Min", {b.node("Add", {h0, b.i64Scalar(1)}), last});
    std::string w1 = b.node("Min", {b.node("Add", {w0, b.i64Scalar(1)}), last});
    std::string dh = b.node("Sub", {hv, toF32(h0)});
    std::string dw = b.node("Sub", {wv, toF32(w0)});
    std::string one = b.f32Scalar(1.0f);
    std::string ih = b.node("Sub", {one, dh}), iw = b.node("Sub", {one, dw});
    int32_t dt = onnxDType(ir::dtypeName(tt.dtype));
    std::string sum;
    const std::pair<std::string, std::string> corners[4] = {
        {h0, w0}, {h0, w1}, {h1, w0}, {h1, w1}};
    const std::pair<std::string, std::string> weights[4] = {
        {ih, iw}, {ih, dw}, {dh, iw}, {dh, dw}};
    for (int k = 0; k < 4; ++k) {
      std::string idx = b.node(
          "Add", {b.node("Mul", {corners[k].first, s}), corners[k].second});
      std::string weight = b.node("Mul", {weights[k].first, weights[k].second});
      if (dt != kF32)
        weight = castTo(weight, dt);
      std::string term = b.node(
          "Mul", {b.node("Gather", {x(0), idx}, {OnnxAttr::integer("axis", 0)}),
                  b.node("Unsqueeze", {weight, b.i64({1})})});
      sum = sum.empty() ? term : b.node("Add", {sum, term});
    }
    def(r, sum);
    return true;
  }
  case OpKind::BucketPositions: {
    const ir::TensorType &mt = op.getOperand(0)->type;
    int64_t rows = mt.dims[1].getConstant().value_or(0);
    int64_t cols = mt.dims[2].getConstant().value_or(0);
    int64_t side = op.attr<int64_t>("side");
    std::string zero = b.scalar(0, onnxDType(ir::dtypeName(mt.dtype)));
    std::string real = b.node("Not", {b.node("Equal", {x(0), zero})});
    std::string real64 =
        b.node("Cast", {real}, {OnnxAttr::integer("to", kI64)});
    // Real rows: the first column's count; real columns: the first row's.
    auto count = [&](int64_t sliceAxis, int64_t sumAxis) {
      std::string line =
          b.node("Slice", {real64, b.i64({0}), b.i64({1}), b.i64({sliceAxis})});
      std::string c = b.node("ReduceSum", {line, b.i64({1, 2})},
                             {OnnxAttr::integer("keepdims", 0)});
      (void)sumAxis;
      return b.node("Max", {c, b.i64Scalar(1)});
    };
    std::string nr = count(2, 1), nc = count(1, 2);
    auto buckets = [&](int64_t len, const std::string &nreal) {
      std::string idx =
          b.node("Range", {b.i64Scalar(0), b.i64Scalar(len), b.i64Scalar(1)});
      return b.node(
          "Div", {b.node("Unsqueeze",
                         {b.node("Mul", {idx, b.i64Scalar(side)}), b.i64({0})}),
                  b.node("Unsqueeze", {nreal, b.i64({1})})}); // [n, len]
    };
    std::string br = buckets(rows, nr), bc = buckets(cols, nc);
    std::string pos = b.node(
        "Add", {b.node("Mul", {b.node("Unsqueeze", {br, b.i64({2})}),
                               b.i64Scalar(side)}),
                b.node("Unsqueeze", {bc, b.i64({1})})}); // [n, rows, cols]
    std::string kept = b.node("Where", {real, pos, b.i64Scalar(0)});
    def(r, b.node("Reshape", {kept, b.i64({0, rows * cols})}));
    return true;
  }
  default:
    return fail(op, "unsupported vision op");
  }
}

std::string OnnxLowering::mropeFrequencies(const ir::Op &rope,
                                           const std::string &freqs,
                                           int64_t half) {
  std::vector<int64_t> sections = ir::mropeSections(rope);
  bool interleaved = ir::mropeInterleaved(rope);
  int64_t axes = static_cast<int64_t>(sections.size());
  // axis[j]: the position row frequency j reads.
  std::vector<int64_t> axis(static_cast<size_t>(half), 0);
  if (interleaved) {
    // Qwen3-VL: t h w t h w ..., h for the first 3 s_h channels with j % 3
    // == 1, w likewise with j % 3 == 2 (further axes the same way), the
    // rest t.
    for (int64_t j = 0; j < half; ++j)
      for (int64_t a = 1; a < axes; ++a)
        if (j % axes == a && j < axes * sections[static_cast<size_t>(a)])
          axis[static_cast<size_t>(j)] = a;
  } else {
    // Qwen2-VL / Qwen2.5-VL: consecutive sections.
    int64_t j = 0;
    for (int64_t a = 0; a < axes; ++a)
      for (int64_t k = 0; k < sections[static_cast<size_t>(a)] && j < half; ++k)
        axis[static_cast<size_t>(j++)] = a;
  }
  std::vector<float> onehot(static_cast<size_t>(axes * half), 0.0f);
  for (int64_t j = 0; j < half; ++j)
    onehot[static_cast<size_t>(axis[static_cast<size_t>(j)] * half + j)] = 1.0f;
  // freqs [axes, B, S, half] -> sum_a freqs[a] * onehot[a].
  std::string sel = b.f32(onehot, {axes, 1, 1, half});
  return b.node("ReduceSum", {b.node("Mul", {freqs, sel}), b.i64({0})},
                {OnnxAttr::integer("keepdims", 0)});
}

std::string OnnxLowering::bidirectionalRuns(const ir::Op &attn,
                                            const std::string &allowed,
                                            const std::string &q,
                                            const std::string &total) {
  if (attn.getKind() != OpKind::Attention)
    return allowed;
  const ir::Value *flags = attn.operand("bidirectional");
  if (!flags || allowed.empty())
    return allowed; // no rule, or every pair already allowed
  std::string marked = b.node(
      "Not",
      {b.node("Equal", {in(flags), b.scalar(0, onnxDType(ir::dtypeName(
                                                   flags->type.dtype)))})});
  std::string s = b.node("Gather", {b.node("Shape", {q}), b.i64Scalar(1)},
                         {OnnxAttr::integer("axis", 0)});
  std::string batch = b.node("Gather", {b.node("Shape", {q}), b.i64Scalar(0)},
                             {OnnxAttr::integer("axis", 0)});
  // A run starts at a marked token whose predecessor (in this call) is not.
  std::string prev = b.node(
      "Concat",
      {b.node("ConstantOfShape",
              {b.node("Concat",
                      {b.node("Unsqueeze", {batch, b.i64({0})}), b.i64({1})},
                      {OnnxAttr::integer("axis", 0)})},
              {}),
       b.node("Cast",
              {b.node("Slice", {marked, b.i64({0}), b.i64({-1}), b.i64({1})})},
              {OnnxAttr::integer("to", kF32)})},
      {OnnxAttr::integer("axis", 1)});
  std::string start = b.node(
      "And",
      {marked, b.node("Not", {b.node("Cast", {prev},
                                     {OnnxAttr::integer("to", kBool)})})});
  std::string run = b.node(
      "CumSum", {b.node("Cast", {start}, {OnnxAttr::integer("to", kI64)}),
                 b.i64Scalar(1)});
  // Keys: the past (never in a run of this call's tokens), then the call's.
  std::string past = b.node("Sub", {total, s});
  std::string pastShape = b.node("Concat",
                                 {b.node("Unsqueeze", {batch, b.i64({0})}),
                                  b.node("Unsqueeze", {past, b.i64({0})})},
                                 {OnnxAttr::integer("axis", 0)});
  std::string zeros64 = b.node("ConstantOfShape", {pastShape}, {});
  std::string keyRun =
      b.node("Concat",
             {b.node("Cast", {zeros64}, {OnnxAttr::integer("to", kI64)}), run},
             {OnnxAttr::integer("axis", 1)});
  std::string keyMarked = b.node(
      "Concat",
      {b.node("Cast", {zeros64}, {OnnxAttr::integer("to", kBool)}), marked},
      {OnnxAttr::integer("axis", 1)});
  // [B, 1, 1, S, 1] against [B, 1, 1, 1, T].
  auto asQuery = [&](const std::string &v) {
    return b.node("Unsqueeze", {v, b.i64({1, 2, 4})});
  };
  auto asKey = [&](const std::string &v) {
    return b.node("Unsqueeze", {v, b.i64({1, 2, 3})});
  };
  std::string pair =
      b.node("And", {b.node("And", {asQuery(marked), asKey(keyMarked)}),
                     b.node("Equal", {asQuery(run), asKey(keyRun)})});
  return b.node("Or", {allowed, pair});
}

std::string OnnxLowering::keyAndSegmentMasks(const ir::Op &attn,
                                             std::string allowed) {
  if (attn.getKind() != OpKind::Attention)
    return allowed;
  auto visible = [&](const ir::Value *v) {
    return b.node("Not",
                  {b.node("Equal", {in(v), b.scalar(0, onnxDType(ir::dtypeName(
                                                           v->type.dtype)))})});
  };
  auto both = [&](const std::string &m) {
    allowed = allowed.empty() ? m : b.node("And", {allowed, m});
  };
  if (const ir::Value *km = attn.operand("key_mask"))
    both(b.node("Unsqueeze", {visible(km), b.i64({1, 2, 3})}));
  if (const ir::Value *seg = attn.operand("segments")) {
    const std::string &ids = in(seg);
    both(b.node("Equal", {b.node("Unsqueeze", {ids, b.i64({1, 2, 4})}),
                          b.node("Unsqueeze", {ids, b.i64({1, 2, 3})})}));
  }
  return allowed;
}

} // namespace archc
