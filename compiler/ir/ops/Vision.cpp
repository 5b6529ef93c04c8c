//===- Vision.cpp - Ops of vision encoders and multimodal embeddings ------===//
//
// This file defines the ops vision-language models need beyond the text
// families:
//   conv2d             strided 2-D convolution (patch embeddings)
//   equal              elementwise ==, a bool mask (image-token positions)
//   expand             broadcast to a shape (class embeddings)
//   scatter_rows       rows written (or added) at a mask's positions (image
//                      features into the text embedding, deepstack); zero
//                      rows written leave x as it is
//   nonzero_rows       which images hold any nonzero value (padding images)
//   select_rows        the rows a mask keeps (a data-dependent count)
//   patch_coords       (row, col) of every patch of flattened-patch inputs
//   patch_segments     the frame or attention window of every such patch
//   patch_interpolate  a learned square position table, bilinearly
//                      interpolated to every image's patch grid
//   bucket_positions   position ids of padded patch grids (NaViT buckets)
// The patch ops read the per-image grids [images, 3] = (t, h, w) of
// Qwen-VL's image_grid_thw: patches are listed image after image, frame
// after frame, and inside a frame in merge-block order (the `merge` x
// `merge` patches of one block consecutive, blocks in raster order), as
// Qwen2VLImageProcessor lays them out.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

namespace archc::ir {

namespace {
bool isInteger(DType t) {
  return t == DType::I64 || t == DType::I32 || t == DType::I8 || t == DType::U8;
}

bool inferConv2d(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  const TensorType &w = op.getOperand(1)->type;
  const auto &stride = op.attr<std::vector<int64_t>>("stride");
  if (x.rank() != 4 || w.rank() != 4) {
    reportOpError(d, op,
                  fmt::format("expects x [batch, channels, height, width] and "
                              "weight [out, channels, kh, kw], got {} and {}",
                              x.str(), w.str()));
    return false;
  }
  if (!isFloat(x.dtype) || x.dtype != w.dtype) {
    reportOpError(d, op,
                  fmt::format("x {} and weight {} must be floating-point "
                              "tensors of one element type",
                              x.str(), w.str()));
    return false;
  }
  if (stride.size() != 2 || stride[0] < 1 || stride[1] < 1) {
    reportOpError(d, op, "stride must be two positive ints [sh, sw]");
    return false;
  }
  if (x.dims[1] != w.dims[1]) {
    reportOpError(d, op,
                  fmt::format("x {} has {} channels, the weight {} expects {}",
                              x.str(), x.dims[1].str(), w.str(),
                              w.dims[1].str()));
    return false;
  }
  auto h = x.dims[2].getConstant(), wd = x.dims[3].getConstant();
  auto kh = w.dims[2].getConstant(), kw = w.dims[3].getConstant();
  if (!h || !wd || !kh || !kw || *kh > *h || *kw > *wd) {
    reportOpError(d, op,
                  fmt::format("needs a known image size at least the kernel "
                              "size, got x {} and weight {}",
                              x.str(), w.str()));
    return false;
  }
  if (const Value *bias = op.operand("bias")) {
    if (bias->type.rank() != 1 || bias->type.dims[0] != w.dims[0] ||
        bias->type.dtype != x.dtype) {
      reportOpError(d, op,
                    fmt::format("bias {} must be [{}] of the weight's type",
                                bias->type.str(), w.dims[0].str()));
      return false;
    }
  }
  op.getResult()->type =
      TensorType(x.dtype, {x.dims[0], w.dims[0], (*h - *kh) / stride[0] + 1,
                           (*wd - *kw) / stride[1] + 1});
  return true;
}

OpCost conv2dCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const TensorType &w = op.getOperand(1)->type;
  const TensorType &y = op.getResult()->type;
  double perOutput =
      ctx.dim(w.dims[1]) * ctx.dim(w.dims[2]) * ctx.dim(w.dims[3]);
  c.macs = ctx.elements(y) * perOutput;
  c.matmulFlops = 2 * c.macs;
  c.flops = c.matmulFlops + (op.hasOperand("bias") ? ctx.elements(y) : 0);
  readOperandsWriteResults(op, ctx, c);
  return c;
}

/// An operand that is a scalar constant (a number in .arch) takes the other
/// operand's element type.
bool isScalarConst(const Value *v) {
  const Op *def = v->getDefiningOp();
  return v->type.rank() == 0 && def && def->getKind() == OpKind::Const;
}

bool inferEqual(Op &op, DiagnosticEngine &d) {
  const Value *a = op.getOperand(0), *b = op.getOperand(1);
  if (a->type.dtype != b->type.dtype && !isScalarConst(a) &&
      !isScalarConst(b)) {
    reportOpError(d, op,
                  fmt::format("element types differ: {} and {}", a->type.str(),
                              b->type.str()));
    return false;
  }
  std::vector<SymExpr> dims;
  if (!broadcastShapes(a->type.dims, b->type.dims, dims)) {
    reportOpError(d, op,
                  fmt::format("shapes {} and {} do not broadcast",
                              a->type.str(), b->type.str()));
    return false;
  }
  op.getResult()->type = TensorType(DType::Bool, dims);
  return true;
}

OpCost elementCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  c.flops = ctx.elements(op.getResult()->type);
  readOperandsWriteResults(op, ctx, c);
  return c;
}

bool inferScatterRows(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  const TensorType &mask = op.getOperand(1)->type;
  const TensorType &rows = op.getOperand(2)->type;
  if (x.rank() < 2 || mask.dtype != DType::Bool ||
      mask.rank() != x.rank() - 1) {
    reportOpError(d, op,
                  fmt::format("expects x [..., d] and a bool mask over its "
                              "leading axes, got {} and {}",
                              x.str(), mask.str()));
    return false;
  }
  for (size_t i = 0; i < mask.rank(); ++i)
    if (mask.dims[i] != x.dims[i]) {
      reportOpError(d, op,
                    fmt::format("mask {} must have the leading dims of x {}",
                                mask.str(), x.str()));
      return false;
    }
  if (rows.rank() != 2 || rows.dims[1] != x.dims.back() ||
      rows.dtype != x.dtype) {
    reportOpError(d, op,
                  fmt::format("rows {} must be [n, {}] of x's element type "
                              "({})",
                              rows.str(), x.dims.back().str(),
                              dtypeName(x.dtype)));
    return false;
  }
  op.getResult()->type = x;
  return true;
}

/// The rows are read and written in place (the rest of x is untouched).
OpCost scatterRowsCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const TensorType &rows = op.getOperand(2)->type;
  double n = ctx.elements(rows);
  bool add = op.attr<bool>("accumulate");
  c.flops = add ? n : 0;
  ctx.read(op.getOperand(1), c);
  ctx.read(op.getOperand(2), c);
  c.activationBytes += n * ctx.activationBits() / 8 * (add ? 2 : 1);
  return c;
}

bool inferExpand(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  const auto &shape = op.attr<std::vector<SymExpr>>("shape");
  std::vector<SymExpr> dims;
  if (!broadcastShapes(x.dims, shape, dims) || dims != shape) {
    reportOpError(d, op,
                  fmt::format("{} does not broadcast to {}", x.str(),
                              TensorType(x.dtype, shape).str()));
    return false;
  }
  op.getResult()->type = TensorType(x.dtype, shape);
  return true;
}

bool inferNonzeroRows(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  if (x.rank() < 1) {
    reportOpError(d, op,
                  fmt::format("needs a tensor of rows, got {}", x.str()));
    return false;
  }
  op.getResult()->type = TensorType(DType::Bool, {x.dims[0]});
  return true;
}

bool inferSelectRows(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  const TensorType &keep = op.getOperand(1)->type;
  const auto &length = op.attr<std::vector<SymExpr>>("length");
  if (x.rank() < 1 || keep.dtype != DType::Bool || keep.rank() != 1 ||
      keep.dims[0] != x.dims[0]) {
    reportOpError(d, op,
                  fmt::format("expects x [n, ...] and keep bool [n], got {} "
                              "and {}",
                              x.str(), keep.str()));
    return false;
  }
  if (length.size() != 1) {
    reportOpError(d, op, "length must be one dim: [images]");
    return false;
  }
  TensorType r = x;
  r.dims[0] = length[0];
  op.getResult()->type = r;
  return true;
}

OpCost copyCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  readOperandsWriteResults(op, ctx, c);
  return c;
}

/// grid [images, 3] integers; patches [P, ...] (only its length is read).
bool checkGrid(const Op &op, const Value *grid, const Value *patches,
               DiagnosticEngine &d) {
  const TensorType &g = grid->type;
  if (!isInteger(g.dtype) || g.rank() != 2 || g.dims[1] != SymExpr(3)) {
    reportOpError(d, op,
                  fmt::format("grid must be integer [images, 3] (t, h, w per "
                              "image), got {}",
                              g.str()));
    return false;
  }
  if (patches->type.rank() < 1) {
    reportOpError(d, op,
                  fmt::format("patches must be [patches, ...], got {}",
                              patches->type.str()));
    return false;
  }
  return true;
}

bool inferPatchCoords(Op &op, DiagnosticEngine &d) {
  if (!checkGrid(op, op.getOperand(0), op.getOperand(1), d))
    return false;
  op.getResult()->type =
      TensorType(DType::I64, {op.getOperand(1)->type.dims[0], SymExpr(2)});
  return true;
}

bool inferPatchSegments(Op &op, DiagnosticEngine &d) {
  if (!checkGrid(op, op.getOperand(0), op.getOperand(1), d))
    return false;
  op.getResult()->type =
      TensorType(DType::I64, {op.getOperand(1)->type.dims[0]});
  return true;
}

bool inferPatchInterpolate(Op &op, DiagnosticEngine &d) {
  const TensorType &table = op.getOperand(0)->type;
  if (!checkGrid(op, op.getOperand(1), op.getOperand(2), d))
    return false;
  auto n = table.rank() == 2 ? table.dims[0].getConstant() : std::nullopt;
  int64_t side = 0;
  if (n)
    while ((side + 1) * (side + 1) <= *n)
      ++side;
  if (!n || side * side != *n || !isFloat(table.dtype)) {
    reportOpError(d, op,
                  fmt::format("table must be a float [side * side, d] grid of "
                              "positions, got {}",
                              table.str()));
    return false;
  }
  op.getResult()->type =
      TensorType(table.dtype, {op.getOperand(2)->type.dims[0], table.dims[1]});
  return true;
}

/// Four table rows per patch, weighted and summed.
OpCost patchInterpolateCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const TensorType &r = op.getResult()->type;
  c.flops = 8 * ctx.elements(r);
  ctx.read(op.getOperand(1), c);
  ctx.write(op.getResult(), c);
  c.activationBytes += 4 * ctx.elements(r) * ctx.activationBits() / 8;
  return c;
}

bool inferBucketPositions(Op &op, DiagnosticEngine &d) {
  const TensorType &m = op.getOperand(0)->type;
  auto h = m.rank() == 3 ? m.dims[1].getConstant() : std::nullopt;
  auto w = m.rank() == 3 ? m.dims[2].getConstant() : std::nullopt;
  if (!h || !w) {
    reportOpError(d, op,
                  fmt::format("expects a patch mask [images, rows, cols] with "
                              "a known grid, got {}",
                              m.str()));
    return false;
  }
  op.getResult()->type = TensorType(DType::I64, {m.dims[0], *h * *w});
  return true;
}

OpCost indexCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  c.flops = 8 * ctx.elements(op.getResult()->type);
  readOperandsWriteResults(op, ctx, c);
  return c;
}
} // namespace

void addVisionSchemas(SchemaList &out) {
  out.push_back(
      SchemaBuilder(OpKind::Conv2d, "2-D convolution without padding")
          .describe("x [batch, channels, h, w] with weight [out, channels, "
                    "kh, kw] (PyTorch's Conv2d layout) at the given stride: "
                    "[batch, out, (h - kh) / sh + 1, (w - kw) / sw + 1]. "
                    "Patch embeddings of vision encoders use stride = "
                    "kernel.")
          .language()
          .operand("x", "float [batch, channels, h, w]")
          .operand("weight", "[out, channels, kh, kw]")
          .optOperand("bias", "[out]")
          .attr("stride", AttrType::IntList, "[sh, sw]")
          .nonEmpty()
          .result("result", "[batch, out, h', w']")
          .infer(inferConv2d)
          .cost(conv2dCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::Equal, "elementwise a == b")
          .describe("A bool mask (numpy broadcasting); a number operand takes "
                    "the other's element type: `op.equal(input_ids, "
                    "image_token_id)`.")
          .language()
          .operand("a", "left operand")
          .operand("b", "right operand")
          .result("result", "bool, the broadcast shape")
          .infer(inferEqual)
          .cost(elementCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::ScatterRows,
                    "rows written at the positions a mask selects")
          .describe("x [..., d] with rows [n, d] at the n positions where "
                    "mask (over x's leading axes) is true, in row-major order "
                    "(Hugging Face's masked_scatter of image features); with "
                    "`accumulate` the rows are added (deepstack). The mask "
                    "must select exactly n positions, except that zero rows "
                    "written leave x unchanged whatever it selects (a "
                    "caller that merges the rows itself).")
          .language()
          .operand("x", "[..., d]")
          .operand("mask", "bool [...]: x's leading axes")
          .operand("rows", "[n, d]")
          .attr("accumulate", AttrType::Bool, false,
                "add the rows instead of replacing")
          .result("result", "same type as x")
          .infer(inferScatterRows)
          .cost(scatterRowsCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::Expand, "x broadcast to a shape")
          .describe("numpy broadcasting of x to `shape` (a class embedding "
                    "repeated for every image: `op.expand(cls, [images, 1, "
                    "d])`).")
          .language()
          .operand("x", "any tensor")
          .attr("shape", AttrType::DimList, "the result's dims")
          .nonEmpty()
          .result("result", "[shape]")
          .infer(inferExpand)
          .cost(copyCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::NonzeroRows, "rows that hold a nonzero value")
          .describe("bool [n]: whether row i of x [n, ...] has a nonzero "
                    "element; when no row has one, row 0 counts as one (an "
                    "all-padding batch keeps one image, as SmolVLM does).")
          .language()
          .operand("x", "[n, ...]")
          .result("result", "bool [n]")
          .infer(inferNonzeroRows)
          .cost(elementCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::SelectRows, "the rows a mask keeps")
          .describe("The rows i of x [n, ...] with keep[i] true, in order; "
                    "their count is known only at run time and is the "
                    "symbolic dim `length`.")
          .language()
          .operand("x", "[n, ...]")
          .operand("keep", "bool [n]")
          .attr("length", AttrType::DimList, "[dim]: the kept rows' count")
          .nonEmpty()
          .result("result", "[length, ...]")
          .infer(inferSelectRows)
          .cost(copyCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::PatchCoords, "row and column of every patch")
          .describe("i64 [patches, 2]: (row, col) of each patch inside its "
                    "frame, for patches listed image by image, frame by "
                    "frame, in merge-block order (grid (t, h, w) per image; "
                    "a merge x merge block's patches consecutive).")
          .language()
          .operand("grid", "integer [images, 3]: (t, h, w) per image")
          .operand("patches", "[patches, ...]: only its length is read")
          .attr("merge", AttrType::Int, int64_t(1), "spatial merge size")
          .atLeast(1)
          .result("result", "i64 [patches, 2]")
          .infer(inferPatchCoords)
          .cost(indexCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::PatchSegments,
                    "the frame or attention window of every patch")
          .describe("i64 [patches]: an id shared by exactly the patches of "
                    "one frame of one image, or with `window` (in merge "
                    "blocks per side) of one window: windows tile each frame's "
                    "merge-block grid from the top left, the last row and "
                    "column of windows cut short (Qwen2.5-VL).")
          .language()
          .operand("grid", "integer [images, 3]: (t, h, w) per image")
          .operand("patches", "[patches, ...]: only its length is read")
          .attr("merge", AttrType::Int, int64_t(1), "spatial merge size")
          .atLeast(1)
          .optAttr("window", AttrType::Int, "window side in merge blocks")
          .atLeast(1)
          .result("result", "i64 [patches]")
          .infer(inferPatchSegments)
          .cost(indexCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::PatchInterpolate,
                    "learned position table interpolated to each patch grid")
          .describe("[patches, d]: the square table [side * side, d] "
                    "sampled bilinearly at each patch of an (h, w) grid, "
                    "row r at linspace(0, side - 1, h)[r] and column c at "
                    "linspace(0, side - 1, w)[c] (align-corners; the four "
                    "weights as Qwen3-VL computes them), patches as "
                    "patch_coords lists them.")
          .language()
          .operand("table", "float [side * side, d]")
          .operand("grid", "integer [images, 3]: (t, h, w) per image")
          .operand("patches", "[patches, ...]: only its length is read")
          .attr("merge", AttrType::Int, int64_t(1), "spatial merge size")
          .atLeast(1)
          .result("result", "[patches, d]")
          .infer(inferPatchInterpolate)
          .cost(patchInterpolateCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::BucketPositions,
                    "position ids of padded patch grids")
          .describe("i64 [images, rows * cols] from a patch mask [images, "
                    "rows, cols] (nonzero = real patch, real patches the top "
                    "left nr x nc of the grid): real patch (r, c) gets "
                    "floor(r side / nr) side + floor(c side / nc), the bucket "
                    "of its fractional coordinates (Idefics3 / SmolVLM), "
                    "padding patches 0. A full grid of side x side gets 0, 1, "
                    "2, ...")
          .language()
          .operand("mask", "[images, rows, cols]")
          .attr("side", AttrType::Int, "position grid side")
          .atLeast(1)
          .result("result", "i64 [images, rows * cols]")
          .infer(inferBucketPositions)
          .cost(indexCost)
          .take());
}

} // namespace archc::ir
