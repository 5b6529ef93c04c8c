//===- Profile.cpp - Parameters, work and traffic of a model --------------===//
//
// This file implements the profile analysis. Per-op formulas (elements are
// evaluated at the point's batch/seq/past):
//   matmul      MACs = elements(out) * K; FLOPs = 2 MACs
//   attention   MACs = B * H * (Dk + Dv) * keys, keys = sum over queries of
//               the positions a causal (sliding-window) kernel visits
//   elementwise/norm/softmax/rope: a fixed FLOP count per element (table in
//               docs/profile.md), transcendentals counted apart as well
//   bytes       operands read + results written; weights at weight bits,
//               activations at activation bits, caches at KV bits; layout
//               ops (reshape, transpose, split, concat, slice) move nothing
//   experts     body compute x k per token; body weights x the expected
//               number of distinct experts the batch touches
//
//===----------------------------------------------------------------------===//
#include "analysis/Profile.h"

#include "ir/OpRules.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace archc {

using ir::OpKind;

Cost &Cost::operator+=(const Cost &o) {
  macs += o.macs;
  matmulFlops += o.matmulFlops;
  flops += o.flops;
  transcendentals += o.transcendentals;
  weightBytes += o.weightBytes;
  activationBytes += o.activationBytes;
  kvReadBytes += o.kvReadBytes;
  kvWriteBytes += o.kvWriteBytes;
  return *this;
}

Cost Cost::scaled(double k) const {
  Cost c = *this;
  c.macs *= k;
  c.matmulFlops *= k;
  c.flops *= k;
  c.transcendentals *= k;
  c.weightBytes *= k;
  c.activationBytes *= k;
  c.kvReadBytes *= k;
  c.kvWriteBytes *= k;
  return c;
}

double expectedDistinctExperts(int64_t experts, int64_t k, double tokens) {
  if (experts <= 0)
    return 0;
  double e = static_cast<double>(experts);
  return e * (1.0 - std::pow(1.0 - static_cast<double>(k) / e, tokens));
}

int64_t ModelFacts::activatedParamsPerToken() const {
  int64_t p = params;
  for (const MoeFacts &m : moe)
    p -= (m.experts - m.topK) * m.paramsPerExpert * m.layers;
  return p;
}

double ModelFacts::expectedActivatedParams(double tokens) const {
  double p = static_cast<double>(params - expertParams);
  for (const MoeFacts &m : moe)
    p += expectedDistinctExperts(m.experts, m.topK, tokens) *
         static_cast<double>(m.paramsPerExpert * m.layers);
  return p;
}

int64_t ModelFacts::worstCaseActivatedParams(int64_t tokens) const {
  int64_t p = params - expertParams;
  for (const MoeFacts &m : moe) {
    int64_t touched = tokens > m.experts / std::max<int64_t>(m.topK, 1)
                          ? m.experts
                          : std::min(tokens * m.topK, m.experts);
    p += touched * m.paramsPerExpert * m.layers;
  }
  return p;
}

double ModelFacts::kvBytesPerToken(double kvBits) const {
  double n = 0;
  for (const StateFacts &s : states)
    n += static_cast<double>(s.elementsPerToken) /
         static_cast<double>(std::max<int64_t>(s.stride, 1)) *
         static_cast<double>(s.layers.size()) * (s.bits > 0 ? s.bits : kvBits);
  return n / 8;
}

double ModelFacts::stateBytesPerSequence(double kvBits) const {
  double n = 0;
  for (const StateFacts &s : states)
    n += static_cast<double>(s.elementsPerSequence) *
         static_cast<double>(s.layers.size()) * (s.bits > 0 ? s.bits : kvBits);
  return n / 8;
}

double ModelFacts::kvBytes(int64_t context, int64_t batch,
                           double kvBits) const {
  double n = 0;
  for (const StateFacts &s : states) {
    int64_t tokens = s.window > 0 ? std::min(context, s.window) : context;
    tokens /= std::max<int64_t>(s.stride, 1); // complete windows only
    n += static_cast<double>(s.elementsPerToken) *
         static_cast<double>(s.layers.size()) * static_cast<double>(tokens) *
         (s.bits > 0 ? s.bits : kvBits);
  }
  n += stateBytesPerSequence(kvBits) * 8;
  return n * static_cast<double>(batch) / 8;
}

namespace {

double densityOf(const ir::Value *v,
                 std::map<const ir::Value *, double> &memo) {
  auto it = memo.find(v);
  if (it != memo.end())
    return it->second;
  double d = 1;
  const ir::Op *op = v->getDefiningOp();
  if (op) {
    switch (op->getKind()) {
    case OpKind::Compress:
      // Entries and their flags: one per window; the present state is dense.
      if (v->getResultIndex() < 2)
        d = 1.0 /
            static_cast<double>(std::max<int64_t>(op->getInt("ratio"), 1));
      break;
    case OpKind::Cache:
      // Past and present hold what the new tokens add.
      d = densityOf(op->getOperand(0), memo);
      break;
    case OpKind::Param:
    case OpKind::Const:
    case OpKind::StateIn:
    case OpKind::Gather:
    case OpKind::Attention:
    case OpKind::MlaAttention:
    case OpKind::Route:
    case OpKind::Experts:
    case OpKind::Repeat:
    case OpKind::CausalConv:
    case OpKind::DeltaRule:
      break;
    default:
      // Computed from the entries: as sparse as the sparsest operand.
      for (const ir::Value *o : op->operands)
        d = std::min(d, densityOf(o, memo));
      break;
    }
  }
  memo[v] = d;
  return d;
}

int64_t staticElements(const ir::TensorType &t) {
  return t.numElements().getConstant().value_or(0);
}

/// The attention op that reads a cache op's keys/values (not its extra
/// keys), if any.
const ir::Op *attentionReading(const ir::Block &b, const ir::Value *v) {
  for (const auto &op : b.getOps()) {
    if (op->getKind() == OpKind::Attention &&
        (op->getOperand(1) == v || op->getOperand(2) == v))
      return op.get();
    if (op->getKind() == OpKind::MlaAttention)
      for (const ir::Value *o : op->operands)
        if (o == v)
          return op.get();
  }
  return nullptr;
}

int64_t paramsOf(const ir::Module &m, const std::string &pattern) {
  for (const ir::WeightDecl &w : m.weights)
    if (w.pattern == pattern)
      return staticElements(w.type);
  return 0;
}

} // namespace

double keyDensity(const ir::Value *v) {
  std::map<const ir::Value *, double> memo;
  return densityOf(v, memo);
}

ModelFacts computeModelFacts(const ir::Module &m) {
  ModelFacts f;
  for (const ir::WeightDecl &w : m.weights) {
    int64_t n = staticElements(w.type) * w.count();
    f.params += n;
    f.weightTensors += w.count();
    if (w.experts || w.stackedExperts)
      f.expertParams += n;
  }
  for (const auto &op : m.graph.body.getOps()) {
    if (op->getKind() != OpKind::Repeat)
      continue;
    f.layers += op->getInt("end") - op->getInt("begin");
    if (op->getNumOperands())
      f.hidden = op->getOperand(0)->type.dims.back().getConstant().value_or(0);
    for (const auto &region : op->getRegions()) {
      for (const auto &inner : region->getOps()) {
        if (inner->getKind() == OpKind::Cache) {
          StateFacts s;
          s.name = inner->getString("name");
          s.layers = region->layers;
          const ir::TensorType &x = inner->getOperand(0)->type;
          s.elementsPerToken = 1;
          for (size_t i = 2; i < x.rank(); ++i)
            s.elementsPerToken *= x.dims[i].getConstant().value_or(0);
          if (const ir::Op *attn =
                  attentionReading(*region, inner->getResult(0)))
            s.window = attn->getInt("window", 0);
          s.stride = static_cast<int64_t>(
              std::llround(1.0 / keyDensity(inner->getOperand(0))));
          f.states.push_back(s);
        }
        if (inner->getFamily() == ir::OpFamily::Recurrent) {
          ir::TensorType t;
          if (ir::recurrentStateType(*inner, t)) {
            StateFacts s;
            s.name = inner->getString("state");
            s.layers = region->layers;
            s.elementsPerSequence = 1;
            for (size_t i = 1; i < t.rank(); ++i)
              s.elementsPerSequence *= t.dims[i].getConstant().value_or(0);
            if (t.dtype == ir::DType::F32 &&
                (inner->getKind() == OpKind::DeltaRule ||
                 inner->getKind() == OpKind::Compress))
              s.bits = 32;
            f.states.push_back(s);
          }
        }
        if (inner->getKind() == OpKind::Experts) {
          MoeFacts mf;
          mf.experts = inner->getInt("count");
          mf.topK =
              inner->getOperand(1)->type.dims.back().getConstant().value_or(0);
          mf.layers = static_cast<int64_t>(region->layers.size());
          ir::walk(*inner->getRegions()[0], [&](const ir::Op &b) {
            if (b.getKind() == OpKind::Param &&
                b.getString("name").find("{e}") != std::string::npos)
              mf.paramsPerExpert += paramsOf(m, b.getString("name"));
            if (b.getKind() == OpKind::ExpertSlice)
              mf.paramsPerExpert += staticElements(b.getResult()->type);
          });
          f.moe.push_back(mf);
        }
      }
    }
  }
  return f;
}

namespace {

class OpCoster {
public:
  OpCoster(const ProfilePoint &p, const Precision &bits)
      : bits(bits), env{{"batch", p.batch}, {"seq", p.seq}, {"past", p.past}} {}

  double elements(const ir::TensorType &t) const {
    double n = 1;
    for (const ir::SymExpr &d : t.dims)
      n *= static_cast<double>(d.evaluate(env).value_or(0));
    return n;
  }
  double dim(const ir::SymExpr &d) const {
    return static_cast<double>(d.evaluate(env).value_or(0));
  }

  static bool isParam(const ir::Value *v) {
    const ir::Op *d = v->getDefiningOp();
    if (d && d->getKind() == OpKind::ExpertSlice)
      d = d->getOperand(0)->getDefiningOp();
    return d && d->getKind() == OpKind::Param;
  }

  /// Bytes of a value read as an operand.
  void read(const ir::Value *v, Cost &c) const {
    double n = elements(v->type);
    if (isParam(v))
      c.weightBytes += n * bits.weightBits / 8;
    else if (!ir::isFloat(v->type.dtype))
      c.activationBytes += n * ir::dtypeBits(v->type.dtype) / 8;
    else
      c.activationBytes += n * bits.activationBits / 8;
  }
  void write(const ir::Value *v, Cost &c) const {
    double n = elements(v->type);
    c.activationBytes +=
        n *
        (ir::isFloat(v->type.dtype) ? bits.activationBits
                                    : ir::dtypeBits(v->type.dtype)) /
        8;
  }

  /// Fraction of key positions holding data (1 / ratio for compressed
  /// entries and what is computed from them).
  double density(const ir::Value *v) const { return densityOf(v, densityMemo); }

  Cost cost(const ir::Op &op, const ir::Block &block) const {
    Cost c = opCost(op, block);
    switch (op.getKind()) {
    case OpKind::Attention:
    case OpKind::MlaAttention:
    case OpKind::Compress:
    case OpKind::CausalConv:
    case OpKind::DeltaRule:
    case OpKind::Route:
    case OpKind::Experts:
      return c;
    default:
      break;
    }
    // Ops over compressed entries work on the positions that hold one.
    if (op.getNumResults() > 0) {
      double dn = density(op.getResult(0));
      if (dn < 1)
        c = c.scaled(dn);
    }
    return c;
  }

  Cost opCost(const ir::Op &op, const ir::Block &block) const {
    Cost c;
    switch (op.getKind()) {
    case OpKind::Param:
    case OpKind::Const:
    case OpKind::StateIn:
    case OpKind::StateOut:
    case OpKind::Yield:
    case OpKind::Return:
    case OpKind::Repeat:
    case OpKind::Reshape:
    case OpKind::Transpose:
    case OpKind::Split:
    case OpKind::Concat:
    case OpKind::Slice:
    case OpKind::ExpertSlice: // the reader counts the slice as weights
      return c;
    case OpKind::MatMul: {
      const ir::TensorType &b = op.getOperand(1)->type;
      bool transB = op.getBool("transpose_b");
      double k = dim(transB ? b.dims[b.rank() - 1] : b.dims[b.rank() - 2]);
      c.macs = elements(op.getResult()->type) * k;
      c.matmulFlops = c.flops = 2 * c.macs;
      read(op.getOperand(0), c);
      read(op.getOperand(1), c);
      write(op.getResult(), c);
      return c;
    }
    case OpKind::Gather: {
      // Only the selected rows of the table are read.
      const ir::Value *table = op.getOperand(0);
      double rows = elements(op.getOperand(1)->type);
      double rowElems = elements(table->type) / dim(table->type.dims[0]);
      double rowBits = isParam(table) ? bits.weightBits : bits.activationBits;
      c.weightBytes += rows * rowElems * rowBits / 8;
      read(op.getOperand(1), c);
      write(op.getResult(), c);
      return c;
    }
    case OpKind::Attention:
      return attention(op, block);
    case OpKind::MlaAttention:
      return mla(op);
    case OpKind::CausalConv:
    case OpKind::DeltaRule:
      return recurrent(op);
    case OpKind::Compress:
      return compress(op);
    case OpKind::ReduceSum:
    case OpKind::ReduceMean: {
      // One add per input element (and one divide per output for the mean).
      c.flops = elements(op.getOperand(0)->type);
      if (op.getKind() == OpKind::ReduceMean)
        c.flops += elements(op.getResult()->type);
      read(op.getOperand(0), c);
      write(op.getResult(), c);
      return c;
    }
    case OpKind::Sinkhorn: {
      // 2 iters - 1 steps, each a sum (1 add per element), an eps per
      // row/column and a divide per element.
      double n = elements(op.getOperand(0)->type);
      double steps = 2.0 * static_cast<double>(op.getInt("iters")) - 1.0;
      const ir::TensorType &t = op.getOperand(0)->type;
      c.flops = steps * (2 * n + n / dim(t.dims.back()));
      read(op.getOperand(0), c);
      write(op.getResult(), c);
      return c;
    }
    case OpKind::TopkMask: {
      // Per score: the visibility select and the selection compare.
      c.flops = 2 * elements(op.getOperand(0)->type);
      for (const ir::Value *v : op.operands)
        read(v, c);
      write(op.getResult(), c);
      return c;
    }
    case OpKind::Cache: {
      const ir::Value *x = op.getOperand(0);
      c.kvWriteBytes = elements(x->type) * bits.kvBits / 8;
      read(x, c);
      return c;
    }
    case OpKind::Rope: {
      const ir::TensorType &x = op.getOperand(0)->type;
      double rot = static_cast<double>(
          op.getInt("dim", x.dims[3].getConstant().value_or(0)));
      double rotated = elements(x) / dim(x.dims[3]) * rot;
      c.flops = 3 * rotated;
      read(op.getOperand(0), c);
      read(op.getOperand(1), c);
      write(op.getResult(), c);
      return c;
    }
    case OpKind::Route: {
      const ir::TensorType &l = op.getOperand(0)->type;
      double e = dim(l.dims.back()), tokens = elements(l) / e;
      double k = static_cast<double>(op.getInt("top_k"));
      std::string scoring = op.getString("scoring", "softmax");
      double perScore = scoring == "softmax"        ? 5
                        : scoring == "sigmoid"      ? 3
                        : scoring == "sqrtsoftplus" ? 4
                        : scoring == "sparsemixer"  ? 2 * (4 + 5)
                                                    : 0;
      double scored = op.getString("order") == "topk_score" ? k : e;
      c.flops = tokens *
                (perScore * scored + e + (op.getBool("normalize") ? 2 * k : 0));
      c.transcendentals = scoring == "none" ? 0 : tokens * scored;
      for (const ir::Value *v : op.operands)
        read(v, c);
      for (const auto &r : op.getResults())
        write(r.get(), c);
      return c;
    }
    case OpKind::Experts:
      return experts(op);
    default:
      return elementwise(op);
    }
  }

private:
  const Precision &bits;
  std::map<std::string, int64_t> env;
  mutable std::map<const ir::Value *, double> densityMemo;

  Cost elementwise(const ir::Op &op) const {
    Cost c;
    const ir::Value *r = op.getResult();
    double n = elements(r->type);
    double perElem = 1, transc = 0;
    switch (op.getKind()) {
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Maximum:
    case OpKind::Minimum:
    case OpKind::Neg:
    case OpKind::Abs:
    case OpKind::Relu:
      break;
    case OpKind::Pow:
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Sqrt:
    case OpKind::Tanh:
      transc = 1;
      break;
    case OpKind::Rsqrt:
      perElem = 2;
      transc = 1;
      break;
    case OpKind::Sigmoid:
      perElem = 3;
      transc = 1;
      break;
    case OpKind::Silu:
      perElem = 4;
      transc = 1;
      break;
    case OpKind::Gelu:
      perElem = op.getString("approximate") == "tanh" ? 8 : 5;
      transc = 1;
      break;
    case OpKind::Softplus:
      perElem = 3;
      transc = 2;
      break;
    case OpKind::Clamp:
      perElem = 2;
      break;
    case OpKind::Cast:
      perElem = 0;
      break;
    case OpKind::Softmax:
      perElem = 5;
      transc = 1;
      break;
    case OpKind::RmsNorm:
    case OpKind::LayerNorm: {
      const ir::TensorType &x = op.getOperand(0)->type;
      double rows = n / dim(x.dims.back());
      bool rms = op.getKind() == OpKind::RmsNorm;
      perElem = rms ? 3 : 5;
      perElem += op.getNumOperands() > 1 ? 1 : 0; // weight
      perElem += op.getNumOperands() > 2 ? 1 : 0; // bias
      c.flops = n * perElem + rows * 2;
      c.transcendentals = rows;
      for (const ir::Value *v : op.operands)
        read(v, c);
      write(r, c);
      return c;
    }
    default:
      break;
    }
    c.flops = n * perElem;
    c.transcendentals = n * transc;
    for (const ir::Value *v : op.operands)
      read(v, c);
    write(r, c);
    return c;
  }

  Cost attention(const ir::Op &op, const ir::Block &) const {
    Cost c;
    const ir::TensorType &q = op.getOperand(0)->type;
    const ir::TensorType &k = op.getOperand(1)->type;
    const ir::TensorType &v = op.getOperand(2)->type;
    double b = dim(q.dims[0]), s = dim(q.dims[1]), h = dim(q.dims[2]);
    double dk = dim(q.dims[3]), dv = dim(v.dims[3]);
    double t = dim(k.dims[1]), hk = dim(k.dims[2]);
    double w = static_cast<double>(op.getInt("window", 0));
    bool causal = op.getBool("causal", true);
    double keys = visitedKeys(s, t, w, causal);
    // Distinct key positions read (a window bounds them); shared K = V
    // (one tensor as both) is read once.
    double span = w > 0 ? std::min(t, w + s - 1) : t;
    auto kvRead = [&](const ir::Value *key, const ir::Value *value,
                      double positions) {
      double elems = b * hk * positions * (dk + (key == value ? 0 : dv));
      bool cached = key->getDefiningOp() &&
                    key->getDefiningOp()->getKind() == OpKind::Cache;
      if (cached)
        c.kvReadBytes += elems * bits.kvBits / 8;
      else
        c.activationBytes += elems * bits.activationBits / 8;
    };
    kvRead(op.getOperand(1), op.getOperand(2), span);
    size_t next = 3;
    if (op.getBool("sinks"))
      read(op.getOperand(next++), c);
    if (op.getBool("extra")) {
      // Extra keys (compressed entries, a fraction `dens` of the key
      // positions): query j at position t - s + j sees the
      // floor((t - s + j + 1) dens) entries before it, or the k of them a
      // topk_mask keeps.
      const ir::Value *ek = op.getOperand(next), *ev = op.getOperand(next + 1);
      next += 2;
      double dens = density(ek);
      double limit = 0;
      if (op.getBool("extra_mask")) {
        const ir::Value *em = op.getOperand(next++);
        const ir::Op *sel = em->getDefiningOp();
        if (sel && sel->getKind() == OpKind::TopkMask)
          limit = static_cast<double>(sel->getInt("k"));
        read(em, c);
      }
      double extra = 0;
      for (double j = 0; j < s; ++j) {
        double seen = causal ? std::floor((t - s + j + 1) * dens + 1e-9)
                             : std::floor(t * dens + 1e-9);
        extra += limit > 0 ? std::min(limit, seen) : seen;
      }
      keys += extra;
      kvRead(ek, ev, std::floor(t * dens + 1e-9));
    }
    c.macs = b * h * (dk + dv) * keys;
    c.matmulFlops = 2 * c.macs;
    double scores = b * h * keys;
    double perScore =
        2 /*scale, mask*/ + 5 /*softmax*/ + (op.hasAttr("softcap") ? 3 : 0);
    c.flops = c.matmulFlops + scores * perScore;
    c.transcendentals = scores * (op.hasAttr("softcap") ? 2 : 1);
    read(op.getOperand(0), c);
    for (size_t i = next; i < op.getNumOperands(); ++i)
      read(op.getOperand(i), c);
    write(op.getResult(), c);
    return c;
  }

  /// Keys a causal (sliding-window) kernel visits for s queries over t
  /// keys, query j at position t - s + j.
  static double visitedKeys(double s, double t, double w, bool causal) {
    if (!causal)
      return s * t;
    double base = t - s + 1; // keys of the first query
    if (w <= 0)
      return s * base + s * (s - 1) / 2;
    if (base >= w)
      return s * w;
    double n1 = std::min(s, w - base + 1);
    return n1 * base + n1 * (n1 - 1) / 2 + (s - n1) * w;
  }

  /// MLA: the cheaper of the two exact forms a serving kernel chooses
  /// between, per call:
  ///   expanded: up-project all T cached latents to per-head K/V
  ///             (T c H (dn + dv)), then attention over dn + dr + dv;
  ///   absorbed: fold U_K into the query (S H dn c), attend over the latent
  ///             as one shared head (keys (c + dr) + keys c), apply U_V
  ///             (S H c dv).
  /// The cache read is the latent and the rope key, once.
  Cost mla(const ir::Op &op) const {
    Cost c;
    const ir::TensorType &qn = op.getOperand(0)->type;
    const ir::TensorType &qr = op.getOperand(1)->type;
    const ir::TensorType &lat = op.getOperand(2)->type;
    double b = dim(qn.dims[0]), s = dim(qn.dims[1]), h = dim(qn.dims[2]);
    double dn = dim(qn.dims[3]), dr = dim(qr.dims[3]);
    double t = dim(lat.dims[1]), lc = dim(lat.dims[2]);
    double dv = static_cast<double>(op.getInt("v_dim"));
    double keys = visitedKeys(s, t, 0, op.getBool("causal", true));
    double expanded =
        b * t * lc * h * (dn + dv) + b * h * keys * (dn + dr + dv);
    double absorbed = b * s * h * dn * lc + b * h * keys * (lc + dr) +
                      b * h * keys * lc + b * s * h * lc * dv;
    c.macs = std::min(expanded, absorbed);
    c.matmulFlops = 2 * c.macs;
    double scores = b * h * keys;
    c.flops = c.matmulFlops + scores * (2 + 5);
    c.transcendentals = scores;
    double kvElems = b * t * (lc + dr);
    bool cached = op.getOperand(2)->getDefiningOp() &&
                  op.getOperand(2)->getDefiningOp()->getKind() == OpKind::Cache;
    if (cached)
      c.kvReadBytes = kvElems * bits.kvBits / 8;
    else
      c.activationBytes += kvElems * bits.activationBits / 8;
    read(op.getOperand(0), c);
    read(op.getOperand(1), c);
    read(op.getOperand(4), c); // kv_b weight, once
    for (size_t i = 5; i < op.getNumOperands(); ++i)
      read(op.getOperand(i), c);
    write(op.getResult(), c);
    return c;
  }

  /// Linear-attention state ops: work per token is constant; the state is
  /// read and written once per call (a fused kernel keeps it on chip).
  Cost recurrent(const ir::Op &op) const {
    Cost c;
    size_t base = ir::baseOperandCount(op);
    for (size_t i = 0; i < base; ++i)
      read(op.getOperand(i), c);
    write(op.getResult(0), c);
    if (op.getBool("masked"))
      read(op.operands.back(), c);
    ir::TensorType state;
    ir::recurrentStateType(op, state);
    double stateElems = elements(state);
    if (op.getKind() == OpKind::CausalConv) {
      const ir::TensorType &x = op.getOperand(0)->type;
      double kernel = dim(op.getOperand(1)->type.dims.back());
      c.macs = elements(x) * kernel;
      c.matmulFlops = c.flops = 2 * c.macs;
      double stateBits = bits.kvBits;
      c.kvReadBytes = stateElems * stateBits / 8;
      c.kvWriteBytes = stateElems * stateBits / 8;
      return c;
    }
    const ir::TensorType &k = op.getOperand(1)->type;
    const ir::TensorType &v = op.getOperand(2)->type;
    double b = dim(v.dims[0]), s = dim(v.dims[1]), hv = dim(v.dims[2]);
    double dk = dim(k.dims[3]), dv = dim(v.dims[3]);
    // Per token and value head: S^T k, k d^T and S^T q (3 dk dv MACs), the
    // decay of S (dk dv), the delta (2 dv), one exp.
    c.macs = 3 * b * s * hv * dk * dv;
    c.matmulFlops = 2 * c.macs;
    c.flops = c.matmulFlops + b * s * hv * (dk * dv + 2 * dv);
    c.transcendentals = b * s * hv;
    c.kvReadBytes = stateElems * 32 / 8; // float32 state
    c.kvWriteBytes = stateElems * 32 / 8;
    return c;
  }

  /// op.compress: one entry per window of `ratio` tokens (amortised over
  /// the tokens of the call): per slot and output channel of the window
  /// (W = ratio, 2 ratio with overlap) the gate + ape add, the softmax and
  /// the weighted sum; every token's kv and gate inputs are read once, the
  /// float32 state read and written once per call.
  Cost compress(const ir::Op &op) const {
    Cost c;
    const ir::TensorType &kv = op.getOperand(0)->type;
    double ratio = static_cast<double>(op.getInt("ratio"));
    bool overlap = op.getBool("overlap");
    double window = overlap ? 2 * ratio : ratio;
    double out = dim(kv.dims[2]) / (overlap ? 2 : 1);
    double entries = dim(kv.dims[0]) * dim(kv.dims[1]) / ratio;
    double slots = entries * window * out;
    c.flops = slots * (1 + 5 + 2);
    c.transcendentals = slots;
    for (size_t i = 0; i < ir::baseOperandCount(op); ++i)
      read(op.getOperand(i), c);
    if (op.getBool("masked"))
      read(op.operands.back(), c);
    c.activationBytes += entries * out * bits.activationBits / 8;
    write(op.getResult(1), c);
    ir::TensorType state;
    ir::recurrentStateType(op, state);
    c.kvReadBytes = elements(state) * 32 / 8;
    c.kvWriteBytes = elements(state) * 32 / 8;
    return c;
  }

  Cost experts(const ir::Op &op) const {
    const ir::Block &body = *op.getRegions()[0];
    Cost perExpertAllTokens;
    for (const auto &inner : body.getOps())
      perExpertAllTokens += cost(*inner, body);
    const ir::TensorType &x = op.getOperand(0)->type;
    double tokens = elements(x) / dim(x.dims.back());
    const ir::TensorType &w = op.getOperand(1)->type;
    double k = dim(w.dims.back());
    double e = static_cast<double>(op.getInt("count"));
    // Compute and activations: every token through k experts.
    Cost c = perExpertAllTokens.scaled(k);
    // Weights: each distinct expert touched is read once.
    c.weightBytes = perExpertAllTokens.weightBytes *
                    expectedDistinctExperts(static_cast<int64_t>(e),
                                            static_cast<int64_t>(k), tokens);
    // Weighted sum of the k outputs.
    double out = elements(op.getResult()->type);
    c.flops += 2 * k * out;
    read(op.getOperand(0), c);
    read(op.getOperand(1), c);
    read(op.getOperand(2), c);
    write(op.getResult(), c);
    return c;
  }
};

} // namespace

std::vector<OpProfile> profileOps(const ir::Module &m, const ProfilePoint &p,
                                  const Precision &bits) {
  OpCoster coster(p, bits);
  std::vector<OpProfile> out;
  bool seenRepeat = false;
  for (const auto &op : m.graph.body.getOps()) {
    if (op->getKind() == OpKind::Repeat) {
      seenRepeat = true;
      for (const auto &region : op->getRegions()) {
        double n = static_cast<double>(region->layers.size());
        std::string group = "layers " + ir::formatLayers(region->layers);
        for (const auto &inner : region->getOps()) {
          Cost c = coster.cost(*inner, *region);
          out.push_back({inner.get(), group, n, c.scaled(n)});
        }
      }
      continue;
    }
    Cost c = coster.cost(*op, m.graph.body);
    out.push_back({op.get(), seenRepeat ? "head" : "embedding", 1, c});
  }
  return out;
}

} // namespace archc
