//===- OpBuiltins.cpp - op.* semantic ops and built-in functions ----------===//
//
// This file implements the calls to built-ins: `op.<name>(...)` creates the
// IR op of that name (attributes from named arguments), and plain built-in
// functions (`param`, `len`, `get`, ...) compute compile-time values. It also
// builds the model graph (inputs, body, outputs).
//
//===----------------------------------------------------------------------===//
#include "irgen/Evaluator.h"

#include <fmt/format.h>

#include <cmath>

namespace archc {

using ir::OpKind;

bool Evaluator::checkBuiltinArg(const BuiltinSignature &sig,
                                const BuiltinParam &p, BoundArg &a) {
  std::string type = p.type;
  bool optional = !type.empty() && type.back() == '?';
  if (optional)
    type.pop_back();
  EvalValue &v = a.value;
  if (v.isNone() && (optional || type == "any"))
    return true;
  bool ok;
  if (type == "any")
    ok = true;
  else if (type == "tensor")
    ok = v.isTensor() || v.isNumber();
  else if (type == "int")
    ok = v.isInt();
  else if (type == "float") {
    ok = v.isNumber();
    if (ok)
      v = EvalValue::floating(v.getNumber());
  } else if (type == "bool")
    ok = v.getKind() == EvalValue::Kind::Bool;
  else if (type == "string")
    ok = v.getKind() == EvalValue::Kind::String;
  else if (type == "list")
    ok = v.getKind() == EvalValue::Kind::List ||
         v.getKind() == EvalValue::Kind::Tuple;
  else if (type == "dict")
    ok = v.getKind() == EvalValue::Kind::Dict;
  else if (type == "function")
    ok = v.getKind() == EvalValue::Kind::Function;
  else
    ok = false;
  if (!ok)
    error(a.range, fmt::format("argument '{}' of '{}' must be {}, got {}",
                               p.name, sig.name, p.type, v.typeName()));
  return ok;
}

EvalValue Evaluator::callOpBuiltin(const BuiltinSignature &sig,
                                   std::vector<BoundArg> &args,
                                   SourceRange range) {
  auto arg = [&](const std::string &name) -> BoundArg & {
    for (size_t k = 0; k < sig.params.size(); ++k)
      if (sig.params[k].name == name)
        return args[k];
    static BoundArg none;
    return none;
  };
  auto present = [&](const std::string &name) {
    BoundArg &a = arg(name);
    return a.present && !a.value.isNone();
  };
  auto tensorArg = [&](const std::string &name) -> ir::Value * {
    BoundArg &a = arg(name);
    return asTensor(a.value, a.present ? a.range : range);
  };
  auto setAttr = [&](ir::Op *op, const std::string &name,
                     const std::string &attrName) {
    if (!present(name))
      return;
    ir::Attr at;
    if (toAttr(arg(name).value, at))
      op->attrs[attrName] = at;
  };
  const std::string &n = sig.name;

  static const std::map<std::string, OpKind> simple = {
      {"add", OpKind::Add},           {"sub", OpKind::Sub},
      {"mul", OpKind::Mul},           {"div", OpKind::Div},
      {"pow", OpKind::Pow},           {"maximum", OpKind::Maximum},
      {"minimum", OpKind::Minimum},   {"neg", OpKind::Neg},
      {"exp", OpKind::Exp},           {"log", OpKind::Log},
      {"sqrt", OpKind::Sqrt},         {"rsqrt", OpKind::Rsqrt},
      {"tanh", OpKind::Tanh},         {"sigmoid", OpKind::Sigmoid},
      {"silu", OpKind::Silu},         {"relu", OpKind::Relu},
      {"softplus", OpKind::Softplus}, {"abs", OpKind::Abs}};
  if (auto it = simple.find(n); it != simple.end()) {
    std::vector<ir::Value *> operands;
    for (size_t k = 0; k < sig.params.size(); ++k) {
      ir::Value *v = tensorArg(sig.params[k].name);
      if (!v)
        return EvalValue::poison();
      operands.push_back(v);
    }
    return EvalValue::tensor(
        createOp(it->second, operands, range)->getResult());
  }
  if (n == "gelu") {
    ir::Value *x = tensorArg("x");
    if (!x)
      return EvalValue::poison();
    ir::Op *op = createOp(OpKind::Gelu, {x}, range);
    op->attrs["approximate"] = present("approximate")
                                   ? arg("approximate").value.getString()
                                   : std::string("none");
    return EvalValue::tensor(op->getResult());
  }
  if (n == "clamp") {
    ir::Value *x = tensorArg("x");
    if (!x)
      return EvalValue::poison();
    ir::Op *op = createOp(OpKind::Clamp, {x}, range);
    setAttr(op, "min", "min");
    setAttr(op, "max", "max");
    return EvalValue::tensor(op->getResult());
  }
  if (n == "cast") {
    ir::Value *x = tensorArg("x");
    if (!x)
      return EvalValue::poison();
    std::string dt = arg("dtype").value.getString();
    if (ir::parseDType(dt) == ir::DType::Unknown) {
      error(arg("dtype").range, fmt::format("unknown dtype '{}'", dt));
      return EvalValue::poison();
    }
    ir::Op *op = createOp(OpKind::Cast, {x}, range);
    op->attrs["dtype"] = std::string(ir::dtypeName(ir::parseDType(dt)));
    return EvalValue::tensor(op->getResult());
  }
  if (n == "softmax") {
    ir::Value *x = tensorArg("x");
    if (!x)
      return EvalValue::poison();
    ir::Op *op = createOp(OpKind::Softmax, {x}, range);
    op->attrs["axis"] =
        present("axis") ? arg("axis").value.getInt() : int64_t(-1);
    return EvalValue::tensor(op->getResult());
  }
  if (n == "rms_norm" || n == "layer_norm") {
    std::vector<ir::Value *> operands = {tensorArg("x")};
    if (present("weight"))
      operands.push_back(tensorArg("weight"));
    if (n == "layer_norm" && present("bias")) {
      if (!present("weight")) {
        error(arg("bias").range, "op.layer_norm: a bias needs a weight");
        return EvalValue::poison();
      }
      operands.push_back(tensorArg("bias"));
    }
    for (ir::Value *v : operands)
      if (!v)
        return EvalValue::poison();
    ir::Op *op = createOp(n == "rms_norm" ? OpKind::RmsNorm : OpKind::LayerNorm,
                          operands, range);
    op->attrs["eps"] = arg("eps").value.getNumber();
    if (n == "rms_norm")
      op->attrs["offset"] =
          present("offset") ? arg("offset").value.getNumber() : 0.0;
    return EvalValue::tensor(op->getResult());
  }
  if (n == "reduce_sum" || n == "reduce_mean") {
    ir::Value *x = tensorArg("x");
    if (!x)
      return EvalValue::poison();
    std::vector<int64_t> axes;
    for (const EvalValue &a : arg("axes").value.getList()) {
      if (!a.isInt()) {
        error(arg("axes").range,
              fmt::format("op.{}: 'axes' must be a list of ints", n));
        return EvalValue::poison();
      }
      axes.push_back(a.getInt());
    }
    if (axes.empty()) {
      error(arg("axes").range,
            fmt::format("op.{}: 'axes' must not be empty", n));
      return EvalValue::poison();
    }
    ir::Op *op = createOp(
        n == "reduce_sum" ? OpKind::ReduceSum : OpKind::ReduceMean, {x}, range);
    op->attrs["axes"] = axes;
    op->attrs["keepdims"] =
        present("keepdims") && arg("keepdims").value.getBool();
    return EvalValue::tensor(op->getResult());
  }
  if (n == "sinkhorn") {
    ir::Value *x = tensorArg("x");
    if (!x)
      return EvalValue::poison();
    int64_t iters = arg("iters").value.getInt();
    if (iters < 1) {
      error(
          arg("iters").range,
          fmt::format("op.sinkhorn: iters must be at least 1, got {}", iters));
      return EvalValue::poison();
    }
    ir::Op *op = createOp(OpKind::Sinkhorn, {x}, range);
    op->attrs["iters"] = iters;
    op->attrs["eps"] = present("eps") ? arg("eps").value.getNumber() : 0.0;
    return EvalValue::tensor(op->getResult());
  }
  if (n == "topk_mask") {
    std::vector<ir::Value *> operands = {tensorArg("scores")};
    if (present("valid"))
      operands.push_back(tensorArg("valid"));
    for (ir::Value *v : operands)
      if (!v)
        return EvalValue::poison();
    ir::Op *op = createOp(OpKind::TopkMask, operands, range);
    op->attrs["k"] = arg("k").value.getInt();
    op->attrs["causal"] = !present("causal") || arg("causal").value.getBool();
    if (present("valid"))
      op->attrs["valid"] = true;
    return EvalValue::tensor(op->getResult());
  }
  if (n == "matmul") {
    ir::Value *a = tensorArg("a"), *b = tensorArg("b");
    if (!a || !b)
      return EvalValue::poison();
    ir::Op *op = createOp(OpKind::MatMul, {a, b}, range);
    op->attrs["transpose_b"] =
        present("transpose_b") && arg("transpose_b").value.getBool();
    return EvalValue::tensor(op->getResult());
  }
  if (n == "gather") {
    ir::Value *t = tensorArg("table"), *i = tensorArg("indices");
    if (!t || !i)
      return EvalValue::poison();
    return EvalValue::tensor(
        createOp(OpKind::Gather, {t, i}, range)->getResult());
  }
  if (n == "reshape") {
    ir::Value *x = tensorArg("x");
    if (!x)
      return EvalValue::poison();
    std::vector<ir::SymExpr> dims;
    for (const EvalValue &d : arg("shape").value.getList()) {
      if (d.isInt())
        dims.push_back(d.getInt());
      else if (d.getKind() == EvalValue::Kind::Dim)
        dims.push_back(d.getDim());
      else {
        error(arg("shape").range,
              fmt::format("op.reshape: dims must be ints or symbolic dims, "
                          "got {}",
                          d.typeName()));
        return EvalValue::poison();
      }
    }
    ir::Op *op = createOp(OpKind::Reshape, {x}, range);
    op->attrs["shape"] = dims;
    return EvalValue::tensor(op->getResult());
  }
  if (n == "transpose" || n == "split") {
    ir::Value *x = tensorArg("x");
    if (!x)
      return EvalValue::poison();
    const std::string listName = n == "transpose" ? "perm" : "sizes";
    std::vector<int64_t> ints;
    for (const EvalValue &d : arg(listName).value.getList()) {
      if (!d.isInt()) {
        error(arg(listName).range,
              fmt::format("op.{}: '{}' must be a list of ints", n, listName));
        return EvalValue::poison();
      }
      ints.push_back(d.getInt());
    }
    if (n == "transpose") {
      ir::Op *op = createOp(OpKind::Transpose, {x}, range);
      op->attrs["perm"] = ints;
      return EvalValue::tensor(op->getResult());
    }
    if (ints.empty()) {
      error(arg("sizes").range, "op.split: 'sizes' must not be empty");
      return EvalValue::poison();
    }
    ir::Op *op =
        createOp(OpKind::Split, {x}, range, static_cast<unsigned>(ints.size()));
    op->attrs["sizes"] = ints;
    op->attrs["axis"] =
        present("axis") ? arg("axis").value.getInt() : int64_t(-1);
    std::vector<EvalValue> parts;
    for (size_t k = 0; k < ints.size(); ++k)
      parts.push_back(EvalValue::tensor(op->getResult(k)));
    return EvalValue::tuple(std::move(parts));
  }
  if (n == "concat") {
    std::vector<ir::Value *> operands;
    for (const EvalValue &v : arg("xs").value.getList()) {
      ir::Value *t = asTensor(v, arg("xs").range);
      if (!t)
        return EvalValue::poison();
      operands.push_back(t);
    }
    if (operands.empty()) {
      error(arg("xs").range, "op.concat needs at least one tensor");
      return EvalValue::poison();
    }
    ir::Op *op = createOp(OpKind::Concat, operands, range);
    op->attrs["axis"] =
        present("axis") ? arg("axis").value.getInt() : int64_t(-1);
    return EvalValue::tensor(op->getResult());
  }
  if (n == "slice") {
    ir::Value *x = tensorArg("x");
    if (!x)
      return EvalValue::poison();
    ir::Op *op = createOp(OpKind::Slice, {x}, range);
    op->attrs["axis"] = arg("axis").value.getInt();
    op->attrs["start"] = arg("start").value.getInt();
    op->attrs["end"] = arg("end").value.getInt();
    return EvalValue::tensor(op->getResult());
  }
  if (n == "rope") {
    ir::Value *x = tensorArg("x"), *pos = tensorArg("positions");
    if (!x || !pos)
      return EvalValue::poison();
    ir::Op *op = createOp(OpKind::Rope, {x, pos}, range);
    op->attrs["theta"] = arg("theta").value.getNumber();
    setAttr(op, "dim", "dim");
    op->attrs["interleaved"] =
        present("interleaved") && arg("interleaved").value.getBool();
    if (present("scaling")) {
      ir::Attr at;
      if (!toAttr(arg("scaling").value, at)) {
        error(arg("scaling").range,
              "op.rope: 'scaling' must be a dict of scalars and lists");
        return EvalValue::poison();
      }
      op->attrs["scaling"] = at;
    }
    setAttr(op, "max_positions", "max_positions");
    setAttr(op, "original_max_positions", "original_max_positions");
    return EvalValue::tensor(op->getResult());
  }
  if (n == "attention") {
    std::vector<ir::Value *> operands = {tensorArg("q"), tensorArg("k"),
                                         tensorArg("v")};
    if (present("sinks"))
      operands.push_back(tensorArg("sinks"));
    if (present("extra_k") != present("extra_v")) {
      error(range, "op.attention: extra_k and extra_v go together");
      return EvalValue::poison();
    }
    if (present("extra_mask") && !present("extra_k")) {
      error(arg("extra_mask").range,
            "op.attention: extra_mask needs extra_k and extra_v");
      return EvalValue::poison();
    }
    if (present("extra_k")) {
      operands.push_back(tensorArg("extra_k"));
      operands.push_back(tensorArg("extra_v"));
    }
    if (present("extra_mask"))
      operands.push_back(tensorArg("extra_mask"));
    for (ir::Value *v : operands)
      if (!v)
        return EvalValue::poison();
    ir::Op *op = createOp(OpKind::Attention, operands, range);
    if (present("extra_k"))
      op->attrs["extra"] = true;
    if (present("extra_mask"))
      op->attrs["extra_mask"] = true;
    op->attrs["causal"] = !present("causal") || arg("causal").value.getBool();
    setAttr(op, "window", "window");
    setAttr(op, "scale", "scale");
    setAttr(op, "softcap", "softcap");
    if (present("sinks"))
      op->attrs["sinks"] = true;
    return EvalValue::tensor(op->getResult());
  }
  if (n == "mla_attention") {
    std::vector<ir::Value *> operands = {tensorArg("q_nope"), tensorArg("q_pe"),
                                         tensorArg("latent"), tensorArg("k_pe"),
                                         tensorArg("kv_weight")};
    for (ir::Value *v : operands)
      if (!v)
        return EvalValue::poison();
    ir::Op *op = createOp(OpKind::MlaAttention, operands, range);
    op->attrs["causal"] = !present("causal") || arg("causal").value.getBool();
    op->attrs["v_dim"] = arg("v_dim").value.getInt();
    setAttr(op, "scale", "scale");
    return EvalValue::tensor(op->getResult());
  }
  if (n == "causal_conv1d" || n == "delta_rule") {
    bool conv = n == "causal_conv1d";
    std::vector<std::string> names =
        conv ? std::vector<std::string>{"x", "weight"}
             : std::vector<std::string>{"q", "k", "v", "g", "beta"};
    std::vector<ir::Value *> operands;
    for (const std::string &name : names) {
      ir::Value *v = tensorArg(name);
      if (!v)
        return EvalValue::poison();
      operands.push_back(v);
    }
    std::string state = present("state") ? arg("state").value.getString()
                        : conv           ? std::string("conv_state")
                                         : std::string("recurrent_state");
    if (state.empty() || state.find_first_of(" ./{}") != std::string::npos) {
      error(arg("state").range,
            fmt::format("op.{}: state name '{}' must be a plain word such as "
                        "\"conv_state\"",
                        n, state));
      return EvalValue::poison();
    }
    if (!layer) {
      error(range, fmt::format("op.{} must be used inside a layer loop "
                               "(decode-time state is per layer)",
                               n));
      return EvalValue::poison();
    }
    ir::Op *op = createOp(conv ? OpKind::CausalConv : OpKind::DeltaRule,
                          operands, range);
    op->attrs["state"] = state;
    return EvalValue::tensor(op->getResult());
  }
  if (n == "cache") {
    ir::Value *x = tensorArg("x");
    if (!x)
      return EvalValue::poison();
    const std::string &name = arg("name").value.getString();
    if (name.empty() || name.find_first_of(" ./{}") != std::string::npos) {
      error(arg("name").range,
            fmt::format("op.cache: state name '{}' must be a plain word such "
                        "as \"key\"",
                        name));
      return EvalValue::poison();
    }
    if (!layer) {
      error(range, "op.cache must be used inside a layer loop (decode-time "
                   "state is per layer)");
      return EvalValue::poison();
    }
    ir::Op *op = createOp(OpKind::Cache, {x}, range);
    op->attrs["name"] = name;
    return EvalValue::tensor(op->getResult());
  }
  if (n == "compress") {
    std::vector<ir::Value *> operands;
    for (const char *name : {"kv", "gate", "ape"}) {
      ir::Value *v = tensorArg(name);
      if (!v)
        return EvalValue::poison();
      operands.push_back(v);
    }
    std::string state = present("state") ? arg("state").value.getString()
                                         : std::string("compress_state");
    if (state.empty() || state.find_first_of(" ./{}") != std::string::npos) {
      error(arg("state").range,
            fmt::format("op.compress: state name '{}' must be a plain word "
                        "such as \"compress_state\"",
                        state));
      return EvalValue::poison();
    }
    int64_t ratio = arg("ratio").value.getInt();
    if (ratio < 2) {
      error(
          arg("ratio").range,
          fmt::format("op.compress: ratio must be at least 2, got {}", ratio));
      return EvalValue::poison();
    }
    if (!layer) {
      error(range, "op.compress must be used inside a layer loop (decode-time "
                   "state is per layer)");
      return EvalValue::poison();
    }
    ir::Op *op = createOp(OpKind::Compress, operands, range, 2);
    op->attrs["ratio"] = ratio;
    op->attrs["overlap"] = present("overlap") && arg("overlap").value.getBool();
    op->attrs["state"] = state;
    return EvalValue::tuple({EvalValue::tensor(op->getResult(0)),
                             EvalValue::tensor(op->getResult(1))});
  }
  if (n == "route") {
    std::vector<ir::Value *> operands = {tensorArg("logits")};
    if (present("bias"))
      operands.push_back(tensorArg("bias"));
    if (present("table") != present("tokens")) {
      error(range, "op.route: table and tokens go together (hash routing: "
                   "the experts of token t are table[t])");
      return EvalValue::poison();
    }
    if (present("table")) {
      operands.push_back(tensorArg("table"));
      operands.push_back(tensorArg("tokens"));
    }
    for (ir::Value *v : operands)
      if (!v)
        return EvalValue::poison();
    ir::Op *op = createOp(OpKind::Route, operands, range, 2);
    if (present("table"))
      op->attrs["table"] = true;
    op->attrs["top_k"] = arg("top_k").value.getInt();
    op->attrs["scoring"] = present("scoring") ? arg("scoring").value.getString()
                                              : std::string("softmax");
    op->attrs["order"] = present("order") ? arg("order").value.getString()
                                          : std::string("score_topk");
    op->attrs["normalize"] =
        present("normalize") && arg("normalize").value.getBool();
    op->attrs["scale"] =
        present("scale") ? arg("scale").value.getNumber() : 1.0;
    op->attrs["groups"] =
        present("groups") ? arg("groups").value.getInt() : int64_t(1);
    op->attrs["topk_groups"] =
        present("topk_groups") ? arg("topk_groups").value.getInt() : int64_t(1);
    if (present("bias"))
      op->attrs["bias"] = true;
    if (present("jitter_eps"))
      op->attrs["jitter_eps"] = arg("jitter_eps").value.getNumber();
    return EvalValue::tuple({EvalValue::tensor(op->getResult(0)),
                             EvalValue::tensor(op->getResult(1))});
  }
  if (n == "experts")
    return buildExperts(args, range);
  error(range, fmt::format("op.{} is not implemented", n));
  return EvalValue::poison();
}

EvalValue Evaluator::buildExperts(std::vector<BoundArg> &args,
                                  SourceRange range) {
  // Params: x, weights, indices, count, body.
  ir::Value *x = asTensor(args[0].value, args[0].range);
  ir::Value *w = asTensor(args[1].value, args[1].range);
  ir::Value *idx = asTensor(args[2].value, args[2].range);
  if (!x || !w || !idx)
    return EvalValue::poison();
  int64_t count = args[3].value.getInt();
  if (count <= 0) {
    error(args[3].range,
          fmt::format("op.experts: count must be positive, got {}", count));
    return EvalValue::poison();
  }
  if (expertCount) {
    error(range, "op.experts cannot be nested in an expert body");
    return EvalValue::poison();
  }
  const Callable &fn = *args[4].value.getFunction();
  if (fn.params->size() != 2) {
    error(args[4].range,
          fmt::format("op.experts: the body must take (tokens, expert "
                      "index), e.g. fn(t, e) {{ ... }}; it takes {} "
                      "parameter(s)",
                      fn.params->size()));
    return EvalValue::poison();
  }
  ir::Op *op = createOp(OpKind::Experts, {x, w, idx}, range);
  op->attrs["count"] = count;
  ir::Block *body = op->addRegion();
  ir::Value *tokens =
      body->addArgument(ir::TensorType::unknown(), (*fn.params)[0].name);
  ir::Block *savedBlock = block;
  block = body;
  expertCount = count;
  std::vector<CallArg> callArgs = {{"", EvalValue::tensor(tokens)},
                                   {"", EvalValue::index("e", std::nullopt)}};
  std::vector<SourceRange> ranges = {args[4].range, args[4].range};
  EvalValue result = callFunction(fn, callArgs, ranges, range);
  expertCount = 0;
  if (result.isPoison()) {
    block = savedBlock;
    return result;
  }
  if (!result.isTensor()) {
    error(args[4].range,
          fmt::format("op.experts: the body must return a tensor, got {}",
                      result.typeName()));
    block = savedBlock;
    return EvalValue::poison();
  }
  createOp(OpKind::Yield, {result.getTensor()}, range, 0);
  block = savedBlock;
  return EvalValue::tensor(op->getResult());
}

EvalValue Evaluator::callFunctionBuiltin(const BuiltinSignature &sig,
                                         std::vector<BoundArg> &args,
                                         SourceRange range) {
  const std::string &n = sig.name;
  auto num = [&](size_t k) -> std::optional<double> {
    if (!args[k].value.isNumber()) {
      error(args[k].range, fmt::format("'{}' needs a number, got {}", n,
                                       args[k].value.typeName()));
      return std::nullopt;
    }
    return args[k].value.getNumber();
  };
  if (n == "param") {
    ir::DType dt = module.activationDType;
    if (args[2].present && !args[2].value.isNone()) {
      dt = ir::parseDType(args[2].value.getString());
      if (dt == ir::DType::Unknown) {
        error(args[2].range,
              fmt::format("unknown dtype '{}'", args[2].value.getString()));
        return EvalValue::poison();
      }
    }
    return declareParam(args[0].value.getString(), args[1].value.getList(), dt,
                        range);
  }
  if (n == "len") {
    const EvalValue &v = args[0].value;
    switch (v.getKind()) {
    case EvalValue::Kind::List:
    case EvalValue::Kind::Tuple:
      return EvalValue::integer(static_cast<int64_t>(v.getList().size()));
    case EvalValue::Kind::Dict:
      return EvalValue::integer(static_cast<int64_t>(v.getDict().size()));
    case EvalValue::Kind::String:
      return EvalValue::integer(static_cast<int64_t>(v.getString().size()));
    default:
      error(args[0].range, fmt::format("len() of a {}", v.typeName()));
      return EvalValue::poison();
    }
  }
  if (n == "min" || n == "max") {
    auto a = num(0), b = num(1);
    if (!a || !b)
      return EvalValue::poison();
    bool pickA = n == "min" ? *a <= *b : *a >= *b;
    return pickA ? args[0].value : args[1].value;
  }
  if (n == "int") {
    const EvalValue &v = args[0].value;
    if (v.isNumber())
      return EvalValue::integer(static_cast<int64_t>(v.getNumber()));
    if (v.getKind() == EvalValue::Kind::Bool)
      return EvalValue::integer(v.getBool());
    if (v.getKind() == EvalValue::Kind::String) {
      try {
        size_t used = 0;
        int64_t r = std::stoll(v.getString(), &used);
        if (used == v.getString().size())
          return EvalValue::integer(r);
      } catch (...) {
      }
    }
    error(args[0].range,
          fmt::format("cannot convert {} '{}' to int", v.typeName(), v.str()));
    return EvalValue::poison();
  }
  if (n == "float") {
    auto a = num(0);
    return a ? EvalValue::floating(*a) : EvalValue::poison();
  }
  if (n == "str")
    return EvalValue::string(args[0].value.str());
  if (n == "get") {
    const EvalValue &d = args[0].value;
    EvalValue dflt = args[2].present ? args[2].value : EvalValue::none();
    if (d.isNone())
      return dflt;
    auto it = d.getDict().find(args[1].value.getString());
    if (it == d.getDict().end() || it->second.isNone())
      return dflt;
    return it->second;
  }
  if (n == "model_dtype")
    return EvalValue::string(ir::dtypeName(module.activationDType));
  if (n == "set") {
    std::map<std::string, EvalValue> entries;
    if (!args[0].value.isNone())
      entries = args[0].value.getDict();
    entries[args[1].value.getString()] = args[2].value;
    return EvalValue::dict(std::move(entries));
  }
  if (n == "sqrt" || n == "log" || n == "exp" || n == "floor" || n == "ceil") {
    auto a = num(0);
    if (!a)
      return EvalValue::poison();
    if ((n == "sqrt" && *a < 0) || (n == "log" && *a <= 0)) {
      error(args[0].range, fmt::format("{}() of {} is undefined", n, *a));
      return EvalValue::poison();
    }
    if (n == "sqrt")
      return EvalValue::floating(std::sqrt(*a));
    if (n == "log")
      return EvalValue::floating(std::log(*a));
    if (n == "exp")
      return EvalValue::floating(std::exp(*a));
    if (n == "floor")
      return EvalValue::integer(static_cast<int64_t>(std::floor(*a)));
    return EvalValue::integer(static_cast<int64_t>(std::ceil(*a)));
  }
  if (n == "pow") {
    auto a = num(0), b = num(1);
    if (!a || !b)
      return EvalValue::poison();
    return EvalValue::floating(std::pow(*a, *b));
  }
  error(range, fmt::format("built-in '{}' is not implemented", n));
  return EvalValue::poison();
}

bool Evaluator::buildModel(const ast::ArchDecl &a,
                           std::shared_ptr<Env> configEnv) {
  arch = &a;
  for (const auto &def : a.defs)
    archDefs[def->name] = def.get();
  archEnvForDefs = configEnv;
  unsigned before = diags.getNumErrors();
  const ast::ModelDecl &model = *a.model;
  ir::Graph &g = module.graph;
  auto env = std::make_shared<Env>(configEnv);
  for (const ast::ModelInput &in : model.inputs) {
    std::vector<ir::SymExpr> dims;
    for (const auto &d : in.dims) {
      EvalValue v = eval(*d, env);
      if (v.isInt())
        dims.push_back(v.getInt());
      else if (v.getKind() == EvalValue::Kind::Dim)
        dims.push_back(v.getDim());
      else if (!v.isPoison())
        error(d->getRange(),
              fmt::format("input dims must be ints or symbolic dims, got {}",
                          v.typeName()));
    }
    ir::Value *arg = g.body.addArgument(
        ir::TensorType(ir::parseDType(in.dtype), dims), in.name);
    env->define(in.name, EvalValue::tensor(arg));
  }
  if (diags.getNumErrors() != before)
    return false;
  block = &g.body;
  exec(model.body, env);
  if (diags.getNumErrors() != before)
    return false;
  std::vector<ir::Value *> outs;
  for (const ast::Target &t : model.outputs) {
    EvalValue *v = env->lookup(t.name);
    if (!v || !v->isTensor()) {
      error(t.range, fmt::format("model output '{}' must be a tensor, got {}",
                                 t.name, v ? v->typeName() : "nothing"));
      continue;
    }
    outs.push_back(v->getTensor());
    g.outputNames.push_back(t.name);
  }
  createOp(OpKind::Return, outs, model.range, 0);
  return diags.getNumErrors() == before;
}

} // namespace archc
