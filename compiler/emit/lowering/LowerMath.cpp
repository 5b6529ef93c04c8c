//===- LowerMath.cpp - ONNX lowering of elementwise, norm, matmul, shape --===//
//
// This file lowers elementwise ops (GELU and SiLU decomposed; greater and
// where in float32), softmax,
// RMSNorm (decomposed, computed in float32) and LayerNorm
// (LayerNormalization), matmul, gather, and the shape ops.
//
// A dense Linear weight (a 2-D float param only float matmuls read, as
// their transpose_b operand) is stored [in, out], so each of its matmuls
// is one MatMul on the N-D activation. A transpose_b matmul of a weight
// read otherwise as well (a tied lm_head, which the embedding Gather also
// reads) keeps the checkpoint layout: Gemm(transB) on the flattened input,
// reshaped back.
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"

#include "emit/lowering/UniformParamReads.h"
#include "emit/onnx/OnnxContribSchemas.h"

#include "ir/OpRules.h"

#include <cmath>
#include <optional>

namespace archc {

using ir::OpKind;

std::string OnnxLowering::asFloat32(const ir::Op &op, size_t i) {
  const ir::Value *v = op.getOperand(i);
  return v->type.dtype == ir::DType::F32
             ? in(v)
             : castTo(in(v), onnx::TensorProto_DataType_FLOAT);
}

bool OnnxLowering::lowerElementwise(const ir::Op &op) {
  const ir::Value *r = op.getResult();
  auto x = [&](size_t i) -> const std::string & {
    return in(op.getOperand(i));
  };
  static const std::map<OpKind, const char *> direct = {
      {OpKind::Add, "Add"},           {OpKind::Sub, "Sub"},
      {OpKind::Mul, "Mul"},           {OpKind::Div, "Div"},
      {OpKind::Pow, "Pow"},           {OpKind::Maximum, "Max"},
      {OpKind::Minimum, "Min"},       {OpKind::Neg, "Neg"},
      {OpKind::Exp, "Exp"},           {OpKind::Log, "Log"},
      {OpKind::Sqrt, "Sqrt"},         {OpKind::Tanh, "Tanh"},
      {OpKind::Sigmoid, "Sigmoid"},   {OpKind::Relu, "Relu"},
      {OpKind::Softplus, "Softplus"}, {OpKind::Abs, "Abs"},
      {OpKind::Floor, "Floor"}};
  if (auto it = direct.find(op.getKind()); it != direct.end()) {
    std::vector<std::string> ins;
    for (size_t i = 0; i < op.getNumOperands(); ++i) {
      const ir::Value *v = op.getOperand(i);
      // A rank-0 operand that adopted the other operand's element type
      // (shape inference) is emitted in that type.
      if (op.getFamily() == ir::OpFamily::Binary && v->type.rank() == 0 &&
          v->type.dtype != r->type.dtype) {
        int32_t to = onnxDType(ir::dtypeName(r->type.dtype));
        const ir::Op *c = v->getDefiningOp();
        ins.push_back(c && c->getKind() == OpKind::Const
                          ? b.scalar(c->attr<double>("value"), to)
                          : castTo(x(i), to));
        continue;
      }
      ins.push_back(x(i));
    }
    def(r, b.node(it->second, ins));
    return true;
  }
  switch (op.getKind()) {
  case OpKind::Greater:
    // Compared in float32: CPU kernels lack half precision, and a rank-0
    // constant of another element type joins there.
    def(r, b.node("Greater", {asFloat32(op, 0), asFloat32(op, 1)}));
    return true;
  case OpKind::Where:
    // Selected in float32 likewise, then cast to the result's element type.
    def(r, narrowTo(b.node("Where", {x(0), asFloat32(op, 1), asFloat32(op, 2)}),
                    r->type.dtype));
    return true;
  case OpKind::Rsqrt:
    def(r, b.node("Reciprocal", {b.node("Sqrt", {x(0)})}));
    return true;
  case OpKind::Silu:
    def(r, b.node("Mul", {x(0), b.node("Sigmoid", {x(0)})}));
    return true;
  case OpKind::Gelu: {
    std::string v = widen(x(0));
    std::string inner;
    if (op.attr<std::string>("approximate") == "tanh") {
      // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      std::string cube = b.node("Mul", {v, b.node("Mul", {v, v})});
      std::string t =
          b.node("Add", {v, b.node("Mul", {cube, b.f32Scalar(0.044715f)})});
      inner = b.node("Tanh", {b.node("Mul", {t, b.f32Scalar(static_cast<float>(
                                                    std::sqrt(2.0 / M_PI)))})});
    } else {
      // 0.5 x (1 + erf(x / sqrt(2)))
      inner = b.node("Erf", {b.node("Div", {v, b.f32Scalar(static_cast<float>(
                                                   std::sqrt(2.0)))})});
    }
    std::string y = b.node("Mul", {b.node("Mul", {v, b.f32Scalar(0.5f)}),
                                   b.node("Add", {inner, b.f32Scalar(1.0f)})});
    def(r, narrow(y));
    return true;
  }
  case OpKind::Clamp: {
    int32_t dt = onnxDType(ir::dtypeName(op.getOperand(0)->type.dtype));
    const double *minV = op.optAttr<double>("min");
    std::string lo = minV ? b.scalar(*minV, dt) : "";
    const double *maxV = op.optAttr<double>("max");
    std::string hi = maxV ? b.scalar(*maxV, dt) : "";
    def(r, b.node("Clip", {x(0), lo, hi}));
    return true;
  }
  case OpKind::Cast:
    // A cast to the type the value already has is the value.
    def(r, op.getOperand(0)->type.dtype == r->type.dtype
               ? x(0)
               : castTo(x(0), onnxDType(op.attr<std::string>("dtype"))));
    return true;
  case OpKind::Softmax: {
    std::string y =
        b.node("Softmax", {widen(x(0))},
               {OnnxAttr::integer("axis", op.attr<int64_t>("axis"))});
    def(r, narrowTo(y, r->type.dtype));
    return true;
  }
  default:
    return fail(op, "unsupported elementwise op");
  }
}

bool OnnxLowering::lowerNorm(const ir::Op &op) {
  const ir::TensorType &t = op.getOperand(0)->type;
  std::string x = widen(in(op.getOperand(0)));
  if (op.getKind() == OpKind::RmsNorm && target == OnnxTarget::Ort &&
      t.dtype == ir::DType::F32) {
    // ONNX Runtime's own kernel (the node its optimizer fuses the portable
    // pattern below into), float32 activations only: half precision keeps
    // Hugging Face's order (normalize in float32, cast, then scale).
    std::string scale;
    int64_t dim = t.dims.back().getConstant().value_or(0);
    double offset = op.attr<double>("offset");
    if (op.getNumOperands() < 2)
      scale = b.f32(std::vector<float>(static_cast<size_t>(dim), 1.0f), {dim});
    else if (offset != 0.0)
      scale = b.node("Add", {in(op.getOperand(1)),
                             b.f32Scalar(static_cast<float>(offset))});
    else
      scale = in(op.getOperand(1));
    contribOps = true;
    float eps = static_cast<float>(op.attr<double>("eps"));
    // A norm of a residual sum a + b (same [batch, seq, hidden] shapes, same
    // block) is one SkipSimplifiedLayerNormalization that also returns the
    // sum; later readers of the sum read that output, and the Add is left
    // to dead-node removal.
    const ir::Op *add = op.getOperand(0)->getDefiningOp();
    if (add && add->getKind() == OpKind::Add && t.rank() == 3 &&
        add->getParentBlock() == op.getParentBlock() &&
        add->getOperand(0)->type == t && add->getOperand(1)->type == t) {
      std::vector<std::string> outs =
          b.nodeN("SkipSimplifiedLayerNormalization",
                  {in(add->getOperand(0)), in(add->getOperand(1)), scale},
                  {OnnxAttr::real("epsilon", eps)}, 4);
      onnx::NodeProto &skip =
          *b.proto().mutable_node(b.proto().node_size() - 1);
      skip.set_domain(kContribDomain);
      skip.set_output(1, ""); // mean, inv_std_var: not needed
      skip.set_output(2, "");
      def(op.getResult(), outs[0]);
      def(add->getResult(), outs[3]);
      return true;
    }
    def(op.getResult(),
        b.node("SimplifiedLayerNormalization", {x, scale},
               {OnnxAttr::integer("axis", -1), OnnxAttr::real("epsilon", eps),
                OnnxAttr::integer("stash_type", 1)}));
    return true;
  }
  if (op.getKind() == OpKind::RmsNorm) {
    // x / sqrt(mean(x^2) + eps) * (offset + w), in float32. Written as
    // Pow(2), ReduceMean, Add, Sqrt, Div, Mul: the pattern ONNX Runtime's
    // optimizer fuses into one SimplifiedLayerNormalization kernel.
    std::string ms = b.node(
        "ReduceMean", {b.node("Pow", {x, b.f32Scalar(2.0f)})},
        {OnnxAttr::list("axes", {-1}), OnnxAttr::integer("keepdims", 1)});
    std::string rms =
        b.node("Sqrt", {b.node("Add", {ms, b.f32Scalar(static_cast<float>(
                                               op.attr<double>("eps")))})});
    std::string y = b.node("Div", {x, rms});
    double offset = op.attr<double>("offset");
    if (op.getNumOperands() > 1 && offset != 0.0) {
      // (offset + w) in float32 before the cast, as the zero-centred norms
      // of Gemma and Qwen3.5 do: 1 + w is not representable in half
      // precision as finely as w itself.
      std::string w = b.node("Add", {widen(in(op.getOperand(1))),
                                     b.f32Scalar(static_cast<float>(offset))});
      y = narrowTo(b.node("Mul", {y, w}), t.dtype);
    } else {
      // x / rms(x) cast to the activation type, then times w (LLaMA's order).
      y = narrowTo(y, t.dtype);
      if (op.getNumOperands() > 1)
        y = b.node("Mul", {y, in(op.getOperand(1))});
    }
    def(op.getResult(), y);
    return true;
  }
  // LayerNormalization needs a scale; use ones when the op has none.
  std::string scale, bias;
  int64_t dim = t.dims.back().getConstant().value_or(0);
  if (op.getNumOperands() > 1)
    scale = widen(in(op.getOperand(1)));
  else
    scale = b.f32(std::vector<float>(static_cast<size_t>(dim), 1.0f), {dim});
  if (op.getNumOperands() > 2)
    bias = widen(in(op.getOperand(2)));
  std::vector<std::string> ins = {x, scale};
  if (!bias.empty())
    ins.push_back(bias);
  std::string y = b.node(
      "LayerNormalization", ins,
      {OnnxAttr::integer("axis", -1),
       OnnxAttr::real("epsilon", static_cast<float>(op.attr<double>("eps")))});
  def(op.getResult(), narrowTo(y, t.dtype));
  return true;
}

void OnnxLowering::findLinearWeights() {
  // Float matrices read only as the B operand of float transpose_b matmuls
  // (anywhere, expert bodies included).
  auto read = [&](const ir::Op &op, size_t i) -> std::optional<bool> {
    if (op.getKind() == OpKind::MatMul && i == 1 &&
        op.attr<bool>("transpose_b") && !quantMatmuls.count(&op))
      return true;
    return std::nullopt;
  };
  auto eligible = [&](const ir::Op &param) {
    const ir::TensorType &t = param.getResult()->type;
    return !quantParams.count(&param) && t.rank() == 2 && ir::isFloat(t.dtype);
  };
  for (const auto &entry :
       uniformParamReads<bool>(module.graph.body, read, eligible))
    linearWeights.insert(entry.first);
}

void OnnxLowering::findReshapedWeights() {
  // Weights read only by Reshapes to one constant shape.
  auto read = [&](const ir::Op &op,
                  size_t) -> std::optional<std::vector<int64_t>> {
    if (op.getKind() != OpKind::Reshape || quantSlices.count(&op))
      return std::nullopt;
    std::vector<int64_t> dims;
    for (const ir::SymExpr &d : op.getResult()->type.dims) {
      auto c = d.getConstant();
      if (!c)
        return std::nullopt;
      dims.push_back(*c);
    }
    return dims;
  };
  auto eligible = [&](const ir::Op &param) {
    return !quantParams.count(&param) &&
           !linearWeights.count(param.getResult()) &&
           param.attr<std::string>("name").find("{e}") == std::string::npos;
  };
  reshapedWeights = uniformParamReads<std::vector<int64_t>>(module.graph.body,
                                                            read, eligible);
}

bool OnnxLowering::lowerMatMul(const ir::Op &op) {
  if (auto q = quantMatmuls.find(&op); q != quantMatmuls.end())
    return lowerQuantizedMatMul(op, q->second);
  if (auto g = weightStorage.quantizedGrouped().find(&op);
      g != weightStorage.quantizedGrouped().end())
    return lowerGroupedQuantized(op, g->second);
  if (quantGathers.count(&op))
    return lowerQuantizedGather(op);
  const std::string &a = in(op.getOperand(0));
  const std::string &w = in(op.getOperand(1));
  if (op.getKind() == OpKind::Gather) {
    def(op.getResult(),
        b.node("Gather", {a, w}, {OnnxAttr::integer("axis", 0)}));
    return true;
  }
  // A columnar expert body: tokens x as columns [in, n], every weight
  // handed over as [out, in].
  if (expertColumnar) {
    def(op.getResult(), b.node("MatMul", {w, a}));
    return true;
  }
  const ir::TensorType &at = op.getOperand(0)->type;
  const ir::TensorType &bt = op.getOperand(1)->type;
  // A weight the expert dispatch already hands over transposed, or a
  // dense Linear weight stored [in, out].
  bool transB = op.attr<bool>("transpose_b") &&
                !transposedWeights.count(op.getOperand(1)) &&
                !linearWeights.count(op.getOperand(1));
  if (!transB) {
    def(op.getResult(), b.node("MatMul", {a, w}));
    return true;
  }
  if (bt.rank() != 2) {
    std::vector<int64_t> perm;
    for (size_t i = 0; i < bt.rank(); ++i)
      perm.push_back(static_cast<int64_t>(i));
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    def(op.getResult(),
        b.node("MatMul",
               {a, b.node("Transpose", {w}, {OnnxAttr::list("perm", perm)})}));
    return true;
  }
  // [out, in] weight: Gemm(transB) on the flattened input keeps the
  // initializer in checkpoint layout.
  if (at.rank() == 2) {
    def(op.getResult(),
        b.node("Gemm", {a, w}, {OnnxAttr::integer("transB", 1)}));
    return true;
  }
  std::string flat =
      b.node("Flatten", {a},
             {OnnxAttr::integer("axis", static_cast<int64_t>(at.rank() - 1))});
  std::string y = b.node("Gemm", {flat, w}, {OnnxAttr::integer("transB", 1)});
  // Output shape from the symbolic dims, built once per graph and shared
  // by every matmul of that output shape; from the input's run-time shape
  // when a dim is not a graph symbol (inside expert bodies), shared per
  // input.
  std::vector<ir::SymExpr> outDims(at.dims.begin(), at.dims.end() - 1);
  outDims.push_back(bt.dims[0]);
  std::string shape =
      expert < 0 && expertIndex.empty() ? sharedShape(outDims) : "";
  if (shape.empty()) {
    std::string &lead = leadingShape[a];
    if (lead.empty())
      lead = b.node("Slice", {b.node("Shape", {a}), b.i64({0}), b.i64({-1})});
    shape =
        b.node("Concat", {lead, b.i64({bt.dims[0].getConstant().value_or(0)})},
               {OnnxAttr::integer("axis", 0)});
  }
  def(op.getResult(),
      b.node("Reshape", {y, shape}, {OnnxAttr::integer("allowzero", 1)}));
  return true;
}

bool OnnxLowering::lowerShapeOp(const ir::Op &op) {
  // An expert slice that only quantized matmuls read: they read the
  // expert's codes directly (no float slice is materialized).
  if (quantSlices.count(&op))
    return true;
  const std::string &x = in(op.getOperand(0));
  const ir::TensorType &xt = op.getOperand(0)->type;
  switch (op.getKind()) {
  case OpKind::Reshape: {
    if (reshapedWeights.count(op.getOperand(0))) {
      def(op.getResult(), x); // the initializer already has these dims
      return true;
    }
    // Dims equal to the input's at the same index are copied (0); one
    // remaining symbolic dim is inferred (-1); others are computed.
    const auto &dims = op.getResult()->type.dims;
    std::vector<std::string> parts;
    bool inferred = false;
    std::vector<int64_t> consts;
    bool allConst = true;
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t v;
      if (auto c = dims[i].getConstant()) {
        v = *c;
      } else if (i < xt.rank() && xt.dims[i] == dims[i]) {
        v = 0;
      } else if (!inferred) {
        v = -1;
        inferred = true;
      } else {
        allConst = false;
        break;
      }
      consts.push_back(v);
    }
    // Inside an expert body the tokens are that expert's gathered subset,
    // so the graph's batch/seq sizes do not apply there.
    if (!allConst && (expert >= 0 || !expertIndex.empty()))
      return fail(op, "a reshape inside an expert body may keep the token "
                      "dims (the input's [batch, seq] at the same positions) "
                      "and infer at most one other symbolic dim");
    // A target with an empty dim needs real sizes (with allowzero, a 0
    // is an empty dim, not a copy of the input's).
    bool emptyDim = false;
    for (const ir::SymExpr &dim : dims)
      emptyDim |= dim.getConstant() == std::optional<int64_t>(0);
    if (emptyDim)
      allConst = false;
    // A computed shape holds real sizes (0 means an empty dim there).
    std::string shape = allConst ? b.i64(consts) : shapeTensor(dims);
    if (shape.empty())
      return fail(op, "cannot compute the target shape");
    def(op.getResult(),
        b.node("Reshape", {x, shape},
               {OnnxAttr::integer("allowzero", allConst ? 0 : 1)}));
    return true;
  }
  case OpKind::Transpose:
    def(op.getResult(),
        b.node(
            "Transpose", {x},
            {OnnxAttr::list("perm", op.attr<std::vector<int64_t>>("perm"))}));
    return true;
  case OpKind::Split: {
    // Empty parts are empty slices at their offset; the others come from
    // one Split (or are x itself when only one part is non-empty).
    const auto &sizes = op.attr<std::vector<int64_t>>("sizes");
    int64_t axis = op.attr<int64_t>("axis");
    std::vector<int64_t> nonEmpty;
    for (int64_t s : sizes)
      if (s > 0)
        nonEmpty.push_back(s);
    std::vector<std::string> outs;
    if (nonEmpty.size() > 1)
      outs = b.nodeN("Split", {x, b.i64(nonEmpty)},
                     {OnnxAttr::integer("axis", axis)}, nonEmpty.size());
    else if (nonEmpty.size() == 1)
      outs = {x};
    size_t next = 0;
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] > 0)
        def(op.getResult(i), outs[next++]);
      else
        def(op.getResult(i), b.node("Slice", {x, b.i64({offset}),
                                              b.i64({offset}), b.i64({axis})}));
      offset += sizes[i];
    }
    return true;
  }
  case OpKind::Concat: {
    // Operands empty along the axis add nothing; when every operand is
    // empty the result is the first of them.
    size_t axis = 0;
    ir::normalizeAxis(op.attr<int64_t>("axis"), xt.rank(), axis);
    std::vector<std::string> ins;
    for (const ir::Value *v : op.operands)
      if (v->type.dims[axis].getConstant() != std::optional<int64_t>(0))
        ins.push_back(in(v));
    if (ins.empty())
      def(op.getResult(), x);
    else if (ins.size() == 1)
      def(op.getResult(), ins[0]);
    else
      def(op.getResult(),
          b.node("Concat", ins,
                 {OnnxAttr::integer("axis", op.attr<int64_t>("axis"))}));
    return true;
  }
  case OpKind::ExpertSlice:
    if (expert < 0 && expertIndex.empty())
      return fail(op, "expert_slice outside an expert body");
    def(op.getResult(),
        expertIndex.empty()
            ? b.node("Gather", {x, b.i64Scalar(expert)},
                     {OnnxAttr::integer("axis", 0)})
            : expertWeight(x, op.getResult()->type,
                           transposedWeights.count(op.getResult()) > 0));
    return true;
  case OpKind::Slice:
    def(op.getResult(), b.node("Slice", {x, b.i64({op.attr<int64_t>("start")}),
                                         b.i64({op.attr<int64_t>("end")}),
                                         b.i64({op.attr<int64_t>("axis")})}));
    return true;
  default:
    return fail(op, "unsupported shape op");
  }
}

} // namespace archc
