//===- Builtins.cpp - Signatures of built-in ops and functions ------------===//
//
// This file holds the tables of `op.*` semantic ops and compile-time
// built-in functions, and the typo suggester.
//
//===----------------------------------------------------------------------===//
#include "irgen/Builtins.h"

#include <algorithm>
#include <map>

namespace archc {

namespace {

BuiltinParam req(std::string n, std::string t) { return {n, t, true}; }
BuiltinParam opt(std::string n, std::string t) { return {n, t, false}; }

const std::vector<BuiltinSignature> &opTable() {
  static const std::vector<BuiltinSignature> table = [] {
    std::vector<BuiltinSignature> t;
    for (const char *n :
         {"add", "sub", "mul", "div", "pow", "maximum", "minimum"})
      t.push_back({n,
                   {req("a", "tensor"), req("b", "tensor")},
                   false,
                   "elementwise binary op with broadcasting"});
    for (const char *n : {"neg", "exp", "log", "sqrt", "rsqrt", "tanh",
                          "sigmoid", "silu", "relu", "softplus", "abs"})
      t.push_back({n, {req("x", "tensor")}, false, "elementwise unary op"});
    t.push_back({"gelu",
                 {req("x", "tensor"), opt("approximate", "string")},
                 false,
                 "GELU; approximate: \"none\" (erf) or \"tanh\""});
    t.push_back(
        {"clamp",
         {req("x", "tensor"), opt("min", "float?"), opt("max", "float?")},
         false,
         "clamp to [min, max]"});
    t.push_back({"cast",
                 {req("x", "tensor"), req("dtype", "string")},
                 false,
                 "convert element type"});
    t.push_back({"softmax",
                 {req("x", "tensor"), opt("axis", "int")},
                 false,
                 "softmax along an axis"});
    t.push_back({"rms_norm",
                 {req("x", "tensor"), opt("weight", "tensor?"),
                  req("eps", "float"), opt("offset", "float")},
                 false,
                 "x / rms(x) * (offset + weight) over the last axis"});
    t.push_back({"layer_norm",
                 {req("x", "tensor"), opt("weight", "tensor?"),
                  opt("bias", "tensor?"), req("eps", "float")},
                 false,
                 "layer normalisation over the last axis"});
    t.push_back(
        {"reduce_sum",
         {req("x", "tensor"), req("axes", "list"), opt("keepdims", "bool")},
         false,
         "sum over the listed axes"});
    t.push_back(
        {"reduce_mean",
         {req("x", "tensor"), req("axes", "list"), opt("keepdims", "bool")},
         false,
         "mean over the listed axes"});
    t.push_back({"sinkhorn",
                 {req("x", "tensor"), req("iters", "int"), opt("eps", "float")},
                 false,
                 "Sinkhorn normalisation of [..., n, n] matrices: columns, "
                 "then iters - 1 rounds of rows and columns"});
    t.push_back({"topk_mask",
                 {req("scores", "tensor"), req("k", "int"),
                  opt("valid", "tensor?"), opt("causal", "bool")},
                 false,
                 "bool mask of each query's k best visible keys"});
    t.push_back(
        {"matmul",
         {req("a", "tensor"), req("b", "tensor"), opt("transpose_b", "bool")},
         false,
         "matrix product; b is [in, out] or [out, in] with "
         "transpose_b"});
    t.push_back({"gather",
                 {req("table", "tensor"), req("indices", "tensor")},
                 false,
                 "rows of table selected by integer indices"});
    t.push_back({"reshape",
                 {req("x", "tensor"), req("shape", "list")},
                 false,
                 "reshape to dims (ints and symbolic dims)"});
    t.push_back({"transpose",
                 {req("x", "tensor"), req("perm", "list")},
                 false,
                 "permute axes"});
    t.push_back({"split",
                 {req("x", "tensor"), req("sizes", "list"), opt("axis", "int")},
                 false,
                 "split into parts of the given sizes (a tuple)"});
    t.push_back({"concat",
                 {req("xs", "list"), opt("axis", "int")},
                 false,
                 "concatenate tensors along an axis"});
    t.push_back({"slice",
                 {req("x", "tensor"), req("axis", "int"), req("start", "int"),
                  req("end", "int")},
                 false,
                 "static slice [start, end) along an axis"});
    t.push_back(
        {"rope",
         {req("x", "tensor"), req("positions", "tensor"), req("theta", "float"),
          opt("dim", "int?"), opt("interleaved", "bool"),
          opt("scaling", "dict?"), opt("max_positions", "int?"),
          opt("original_max_positions", "int?")},
         false,
         "rotary position embedding on [b, s, heads, d]"});
    t.push_back({"attention",
                 {req("q", "tensor"), req("k", "tensor"), req("v", "tensor"),
                  opt("causal", "bool"), opt("window", "int?"),
                  opt("scale", "float?"), opt("softcap", "float?"),
                  opt("sinks", "tensor?"), opt("extra_k", "tensor?"),
                  opt("extra_v", "tensor?"), opt("extra_mask", "tensor?")},
                 false,
                 "scaled dot-product attention core (GQA aware)"});
    t.push_back({"mla_attention",
                 {req("q_nope", "tensor"), req("q_pe", "tensor"),
                  req("latent", "tensor"), req("k_pe", "tensor"),
                  req("kv_weight", "tensor"), req("v_dim", "int"),
                  opt("scale", "float?"), opt("causal", "bool")},
                 false,
                 "multi-head latent attention over a cached latent"});
    t.push_back({"cache",
                 {req("x", "tensor"), req("name", "string")},
                 false,
                 "decode-time state that grows along the sequence"});
    t.push_back(
        {"causal_conv1d",
         {req("x", "tensor"), req("weight", "tensor"), opt("state", "string")},
         false,
         "depthwise causal convolution over the sequence "
         "(state: the last kernel - 1 inputs)"});
    t.push_back(
        {"delta_rule",
         {req("q", "tensor"), req("k", "tensor"), req("v", "tensor"),
          req("g", "tensor"), req("beta", "tensor"), opt("state", "string")},
         false,
         "gated delta-rule recurrence (state: [heads, dk, dv] "
         "in float32)"});
    t.push_back(
        {"compress",
         {req("kv", "tensor"), req("gate", "tensor"), req("ape", "tensor"),
          req("ratio", "int"), opt("overlap", "bool"), opt("state", "string")},
         false,
         "softmax-gated pooling of every `ratio` tokens into "
         "one entry: (entries, valid)"});
    t.push_back({"route",
                 {req("logits", "tensor"), req("top_k", "int"),
                  opt("scoring", "string"), opt("order", "string"),
                  opt("normalize", "bool"), opt("scale", "float"),
                  opt("bias", "tensor?"), opt("groups", "int"),
                  opt("topk_groups", "int"), opt("jitter_eps", "float"),
                  opt("table", "tensor?"), opt("tokens", "tensor?")},
                 false,
                 "MoE router: (weights, indices)"});
    t.push_back({"experts",
                 {req("x", "tensor"), req("weights", "tensor"),
                  req("indices", "tensor"), req("count", "int"),
                  req("body", "function")},
                 false,
                 "weighted sum of the selected experts' outputs"});
    return t;
  }();
  return table;
}

const std::vector<BuiltinSignature> &functionTable() {
  static const std::vector<BuiltinSignature> table = {
      {"param",
       {req("name", "string"), req("shape", "list"), opt("dtype", "string?")},
       false,
       "declares a checkpoint weight under the current name scope"},
      {"len", {req("x", "any")}, false, "length of a list, dict or string"},
      {"min", {req("a", "any"), req("b", "any")}, false, "smaller number"},
      {"max", {req("a", "any"), req("b", "any")}, false, "larger number"},
      {"int", {req("x", "any")}, false, "convert to int (truncates)"},
      {"float", {req("x", "any")}, false, "convert to float"},
      {"str", {req("x", "any")}, false, "convert to string"},
      {"get",
       {req("d", "dict?"), req("key", "string"), opt("default", "any")},
       false,
       "dict lookup with default (none dict gives the default)"},
      {"model_dtype",
       {},
       false,
       "the model's activation dtype (config torch_dtype or --dtype), e.g. "
       "\"bf16\""},
      {"set",
       {req("d", "dict?"), req("key", "string"), req("value", "any")},
       false,
       "a copy of the dict (none: an empty one) with key set"},
      {"sqrt", {req("x", "float")}, false, "square root of a number"},
      {"log", {req("x", "float")}, false, "natural logarithm of a number"},
      {"exp", {req("x", "float")}, false, "e to the power of a number"},
      {"pow", {req("a", "float"), req("b", "float")}, false, "a to the b"},
      {"floor", {req("x", "float")}, false, "round down to int"},
      {"ceil", {req("x", "float")}, false, "round up to int"},
  };
  return table;
}

const BuiltinSignature *find(const std::vector<BuiltinSignature> &t,
                             const std::string &name) {
  for (const BuiltinSignature &s : t)
    if (s.name == name)
      return &s;
  return nullptr;
}

size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1,
                         prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

} // namespace

const BuiltinSignature *lookupOpBuiltin(const std::string &name) {
  return find(opTable(), name);
}
const BuiltinSignature *lookupFunctionBuiltin(const std::string &name) {
  return find(functionTable(), name);
}

std::vector<std::string> opBuiltinNames() {
  std::vector<std::string> n;
  for (auto &s : opTable())
    n.push_back(s.name);
  return n;
}
std::vector<std::string> functionBuiltinNames() {
  std::vector<std::string> n;
  for (auto &s : functionTable())
    n.push_back(s.name);
  return n;
}

std::optional<std::string> suggestName(const std::string &name,
                                       const std::vector<std::string> &cands) {
  std::optional<std::string> best;
  size_t bestDist = 0;
  for (const std::string &c : cands) {
    if (c == name)
      continue;
    size_t d = editDistance(name, c);
    size_t limit = std::max<size_t>(1, std::min(name.size(), c.size()) / 3);
    if (d <= limit && (!best || d < bestDist)) {
      best = c;
      bestDist = d;
    }
  }
  return best;
}

} // namespace archc
