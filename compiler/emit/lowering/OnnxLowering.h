//===- OnnxLowering.h - IR to ONNX graph ------------------------*- C++ -*-===//
//
// This file declares OnnxLowering, which turns the expanded IR (after
// expand-repeat) into an onnx::GraphProto of standard ONNX ops at opset 17:
// RMSNorm, RoPE, attention (GQA, causal/sliding/padding masks), MoE routing
// and expert dispatch are decomposed. Weights become initializers named by
// their checkpoint names (through WeightPlan). Per op family, the lowering
// lives in LowerMath.cpp, LowerReduce.cpp, LowerAttention.cpp,
// LowerMla.cpp, LowerRecurrent.cpp, LowerStateSpace.cpp and LowerMoe.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_ONNXLOWERING_H
#define ARCHC_EMIT_ONNXLOWERING_H

#include "emit/onnx/OnnxBuilder.h"
#include "emit/onnx/OnnxTarget.h"
#include "emit/weights/WeightPlan.h"
#include "emit/weights/WeightStorage.h"
#include "ir/IR.h"
#include "ir/WeightQuant.h"
#include "support/Diagnostics.h"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

namespace archc {

/// The opset the emitted models import (the newest the linked onnx library
/// knows, 1.12 -> 17).
constexpr int kOnnxOpset = 17;

/// Names of symbolic dims in ONNX graphs (onnxruntime-genai / Optimum).
std::string onnxDimName(const ir::SymExpr &e);

class OnnxLowering {
public:
  /// Lowers `m` into `g`, its weights registered in `w` and stored as
  /// `storage` decided (float, or block-quantized readers).
  OnnxLowering(const ir::Module &m, onnx::GraphProto &g, WeightPlan &w,
               DiagnosticEngine &d, const WeightStorage &storage,
               OnnxTarget target = OnnxTarget::Portable);
  /// Lowers the whole graph (inputs, ops, outputs).
  bool run();
  /// Whether the graph uses com.microsoft contrib ops (quantized weights).
  bool usesContribOps() const { return contribOps; }

private:
  const ir::Module &module;
  GraphBuilder b;
  WeightPlan &weights;
  DiagnosticEngine &diags;
  int32_t act; ///< onnx element type of activations
  std::unordered_map<const ir::Value *, std::string> names;
  /// Definitions produced only if a value is used.
  std::unordered_map<const ir::Value *, std::function<std::string()>> deferred;
  /// [batch, heads, length, d] form of cached keys/values.
  std::unordered_map<const ir::Value *, std::string> storage;
  /// 1-D int64 [1] tensors holding each symbolic dim.
  std::map<std::string, std::string> symbols;
  std::map<std::string, std::string> exprSources;
  std::map<std::string, std::pair<std::string, std::string>> ropeCache;
  std::map<std::string, std::string> maskCache;
  /// Shape(x)[:-1] per tensor, shared by the matmuls that read x.
  std::map<std::string, std::string> leadingShape;
  /// Shape tensors by their symbolic dims, shared by the whole graph.
  std::map<std::string, std::string> sharedShapes;
  /// Activations gathered into act-order (input and indices -> result).
  std::map<std::string, std::string> permuted;
  int64_t expert = -1; ///< expert index while lowering an unrolled body
  /// While lowering the Scan body of a stacked dispatch: the body input
  /// holding the iteration's expert's row of hits (non-empty marks the
  /// Scan body), and the number of experts.
  std::string expertIndex;
  int64_t expertCount = 0;
  /// Expert weights of the Scan body handed over with their last two dims
  /// swapped: [in, out] for a flat or ranked body's transpose_b matmuls
  /// (which do not transpose them again), [out, in] for a columnar body's
  /// plain matmuls.
  std::set<const ir::Value *> transposedWeights;
  /// While lowering a columnar expert body: its values are [D, n] (tokens
  /// as columns) and each matmul is W [out, in] x.
  bool expertColumnar = false;
  /// How an expert body sees its n tokens.
  enum class ExpertTokens {
    Ranked,  ///< [..., n, D], the IR's rank (leading dims of 1)
    Flat,    ///< [n, D]
    Columnar ///< [D, n]: ONNX Runtime packs the small x, not the weight
  };
  /// Dense Linear weights: top-level 2-D float params read only as the
  /// transpose_b operand of float matmuls. They are stored [in, out]
  /// (WeightPlan::use transposed) and each matmul is one MatMul.
  std::set<const ir::Value *> linearWeights;
  /// Weights read only by Reshapes to one constant shape: stored in that
  /// shape (the same bytes), so the Reshapes are no nodes.
  std::map<const ir::Value *, std::vector<int64_t>> reshapedWeights;
  /// A Scan input: the outer stacked tensor (transposed to [E, in, out]
  /// by a Transpose of the initializer, which ONNX Runtime folds when the
  /// session is created) and the body input holding one expert's slice.
  struct ScanInput {
    std::string outer;
    bool transposed;
    std::string inner;
  };
  std::vector<ScanInput> scanInputs; ///< in order
  OnnxTarget target; ///< --target: portable ONNX or ONNX Runtime
  /// A SwiGLU expert dispatch run by ONNX Runtime's MoE op (see
  /// LowerFusedMoe.cpp): the body's ops whose gate and up matrices are
  /// one interleaved stack `fc1`, and the part-major stacks it reads.
  struct FusedExperts {
    const ir::Op *gateParam = nullptr, *upParam = nullptr, *downParam = nullptr;
    /// Or the checkpoint's own stacks (a param or its reshape), read through
    /// expert_slice: gate and up as one [E, 2I, D] matrix ([E, D, 2I] when
    /// input-major), its rows [gate | up] or alternating (`interleaved`,
    /// gpt-oss), or as two [E, I, D] stacks (`fc1UpStack`, DBRX); down [E,
    /// D, I] ([E, I, D]); optional [E, 2I] (or two [E, I]) and [E, D]
    /// biases.
    const ir::Value *fc1Stack = nullptr, *fc1UpStack = nullptr;
    const ir::Value *fc2Stack = nullptr;
    const ir::Value *fc1BiasStack = nullptr, *fc1UpBiasStack = nullptr;
    const ir::Value *fc2BiasStack = nullptr;
    bool fc1InputMajor = false, fc2InputMajor = false, interleaved = false;
    /// The activation gate * sigmoid(alpha * gate) * (up + beta).
    float alpha = 1.0f, beta = 0.0f;
    /// Blocks each expert is cut into along its intermediate dim (the
    /// MoE op sees P * E experts of intermediate I / P; fusedParts).
    int64_t parts = 1;
    /// The experts' hidden size D and intermediate size I.
    int64_t hidden = 0, inter = 0;
    /// The SwiGLU's clamp (gate from above, up on both sides), if any.
    std::optional<float> limit;
    /// [P * E, 2 I / P, D] initializer, gate and up rows alternating, and
    /// [P * E, D, I / P] down blocks (part-major: entry p * E + e); the
    /// biases' [P * E, 2 I / P] and [P * E, D] (zero after part 0) blocks.
    std::string fc1, fc2, fc1Bias, fc2Bias;
    /// --quant: the stacks block-quantized (QMoE; fc1 and fc2 are then the
    /// quantized entries' names), with these bits, block and symmetry;
    /// `codes`: the checkpoint's own codes (GPTQ, AWQ, ...) copied.
    bool quantized = false, codes = false;
    int qbits = 0;
    int64_t qblock = 0;
    bool qsym = true;
    QuantizedRef fc1Q, fc2Q;
    /// The route's weight scales the tokens (scale_input, one expert per
    /// token), not the output.
    bool scaleInput = false;
  };
  /// The parts P each expert of hidden size `hidden` and intermediate size
  /// `inter` is cut into (2 when `inter` is even, else 1); quantized, the
  /// largest of them whose blocks QMoE reads (its inputs D and I / P in
  /// whole blocks, two or more per row when asymmetric), 0 if none.
  int64_t fusedParts(int64_t hidden, int64_t inter,
                     const FusedExperts &f) const;
  /// The checkpoint stacks (their params' values) that only a fused
  /// dispatch reads: registered only if something else asks for them.
  std::set<const ir::Value *> fusedStacks;
  /// Fills fusedStacks (--target=ort).
  void findFusedStacks();
  /// The lowering's value caches, saved while a subgraph is built (what a
  /// subgraph defines is not visible outside it).
  struct SavedCaches {
    decltype(OnnxLowering::names) names;
    decltype(OnnxLowering::deferred) deferred;
    decltype(OnnxLowering::storage) storage;
    decltype(OnnxLowering::symbols) symbols, exprSources, maskCache,
        leadingShape, sharedShapes;
    decltype(OnnxLowering::ropeCache) ropeCache;
    decltype(OnnxLowering::permuted) permuted;
  };
  SavedCaches saveCaches() const;
  void restoreCaches(SavedCaches &&saved);

  // Core (OnnxLowering.cpp).
  bool lowerBlock(const ir::Block &block);
  bool lowerOp(const ir::Op &op);
  const std::string &in(const ir::Value *v);
  void def(const ir::Value *v, std::string name) { names[v] = std::move(name); }
  bool fail(const ir::Op &op, const std::string &msg);
  void declareValue(onnx::ValueInfoProto *vi, const std::string &name,
                    const ir::TensorType &t);
  void registerSymbols(const std::string &tensor, const ir::TensorType &t);
  std::string dimTensor(const ir::SymExpr &e);
  std::string shapeTensor(const std::vector<ir::SymExpr> &dims);
  /// shapeTensor(dims), built once per graph ("" when a dim is not
  /// computable from the graph's symbols).
  std::string sharedShape(const std::vector<ir::SymExpr> &dims);
  std::string castTo(const std::string &x, int32_t to);
  /// Computes `body(x32)` in float32 when activations are narrower.
  std::string widen(const std::string &x);
  std::string narrow(const std::string &x);
  /// A float32 value cast to `t` (a value's IR element type).
  std::string narrowTo(const std::string &x, ir::DType t);
  std::string actScalar(double v) { return b.scalar(v, act); }

  // LowerMath.cpp.
  /// Operand i of `op` as float32 (cast unless it is already).
  std::string asFloat32(const ir::Op &op, size_t i);
  bool lowerElementwise(const ir::Op &op);
  bool lowerNorm(const ir::Op &op);
  bool lowerMatMul(const ir::Op &op);
  /// Fills linearWeights (after planQuantization: quantized readers keep
  /// the checkpoint layout).
  void findLinearWeights();
  /// Fills reshapedWeights (after findLinearWeights).
  void findReshapedWeights();
  bool lowerShapeOp(const ir::Op &op);

  // LowerReduce.cpp.
  bool lowerReduce(const ir::Op &op);
  bool lowerTopkMask(const ir::Op &op);

  // LowerAttention.cpp.
  bool lowerRope(const ir::Op &op);
  bool lowerCache(const ir::Op &op);
  bool lowerAttention(const ir::Op &op);
  std::string storageOf(const ir::Value *v);
  /// Dims of grouped-query attention: batch, KV heads, query heads per KV
  /// head, queries S and keys T.
  struct GroupedDims {
    ir::SymExpr batch;
    int64_t kvHeads;
    int64_t groups;
    ir::SymExpr seq;
    ir::SymExpr total;
  };
  /// Scores [B, Hkv, G, S, T] (float32) of queries q4 [B, Hkv, G * S, D]
  /// against `keys` [B, Hkv, T, D]: one matmul per KV head, no broadcast.
  std::string groupedScores(const std::string &q4, const std::string &keys,
                            const GroupedDims &dims);
  /// probs5 [B, Hkv, G, S, T] times `values` [B, Hkv, T, Dv] as
  /// [B, Hkv, G * S, Dv].
  std::string groupedValues(const std::string &probs5,
                            const std::string &values, const GroupedDims &dims);
  /// The boolean mask of allowed (query, key) pairs, broadcastable to
  /// [B, Hkv, G, S, T]; `keys` with its sequence axis gives T when the op
  /// reads no padding mask. A window keeps the last `window` keys, a chunk
  /// the keys of the query's chunk (positions from the first real token).
  std::string allowedMask(const ir::Op &attn, const std::string &q,
                          const std::string &keys, int64_t keysAxis,
                          int64_t window, int64_t chunk = 0);
  /// The ALiBi bias [B or 1, Hkv, G, 1, T] (float32) of an attention op
  /// with `alibi`: slope times key position, scaled.
  std::string alibiBias(const ir::Op &attn, const std::string &keys,
                        int64_t kvHeads, int64_t groups);

  // LowerMla.cpp.
  bool lowerMlaAttention(const ir::Op &op);
  /// --quant MLA: `a` [H, M, k] times each head's MatMulNBits codes of the
  /// stacks `q` ([H, n, blocks, blob]) as [H, M, n], a Scan over the heads.
  std::string perHeadMatMulNBits(const std::string &a, const QuantizedRef &q,
                                 int64_t k, int64_t n);

  // LowerRecurrent.cpp.
  bool lowerCausalConv(const ir::Op &op);
  bool lowerDeltaRule(const ir::Op &op);
  bool lowerCompress(const ir::Op &op);
  /// The padding mask of the op's new tokens as [B, S, 1] in the activation
  /// type (1 = real token), or "" when the op reads no mask.
  std::string newTokenMask(const ir::Op &op, const std::string &x);

  // LowerStateSpace.cpp.
  bool lowerStateSpace(const ir::Op &op);

  // LowerMoe.cpp.
  bool lowerRoute(const ir::Op &op);

  /// [N, width], N the token rows of `experts` op (the product of its
  /// input's leading dims): a shape the layers share where those dims are
  /// graph symbols, else computed from the flattened tokens `x`.
  std::string tokenRowsShape(const ir::Op &op, const std::string &x,
                             int64_t width);

  // LowerFusedMoe.cpp.
  /// Whether `experts` (with its router) is what ONNX Runtime's MoE op
  /// computes: a route with positive weights and no hash table, a SwiGLU
  /// body of per-expert float matrices, f32 activations. Fills `f`'s params.
  bool matchFusedExperts(const ir::Op &op, FusedExperts &f) const;
  /// The part of matchFusedExperts for a body over the checkpoint's own
  /// stacks (expert_slice): [gate | up] split or alternating, or separate
  /// gate and up stacks, with biases, the gpt-oss activation and clamps.
  bool matchStackedBody(const ir::Block &body, FusedExperts &f) const;
  /// The dispatch of a matched `experts` as one MoE op over part-major
  /// stacks, for any token count; `out` is its [N, dOut] float32 result.
  bool dispatchFused(const ir::Op &op, const std::string &x, std::string &out,
                     FusedExperts &f);
  /// dispatchFused's stacks of per-expert checkpoint tensors, and of the
  /// checkpoint's own stacks.
  void perExpertFusedWeights(const ir::Op &op, FusedExperts &f);
  void stackedFusedWeights(FusedExperts &f);
  /// --quant: the fused stacks of `count` experts stored block-quantized
  /// (WeightPlan::quantizeStack) in QMoE's layout.
  void quantizeFusedStacks(FusedExperts &f, int64_t count);

  // LowerExperts.cpp.
  bool lowerExperts(const ir::Op &op);
  /// The Scan over the experts (their weights stacked scan inputs);
  /// accumulates into `out` [N, dOut] float32.
  bool dispatchScan(const ir::Op &op, const std::string &x, std::string &out);
  /// One copy of the body per expert (quantized expert weights).
  bool dispatchUnrolled(const ir::Op &op, const std::string &x,
                        std::string &out);
  /// Runs the expert body over tokens `xe` [n, D] with routing weights
  /// `wsel` [n, 1]; returns the weighted float32 output [n, dOut] ("" on
  /// failure). `tokens` is how the body reads `xe`.
  std::string expertContribution(const ir::Op &op, const std::string &xe,
                                 const std::string &wsel, ExpertTokens tokens);
  /// Whether the body can run columnar: its matrices are 2-D expert
  /// weights only matmuls read, everything else elementwise on the tokens'
  /// values or scalars.
  bool expertBodyColumnar(const ir::Block &body) const;
  /// Whether the body's lowering is the same for tokens of any rank
  /// (matmuls on the slices the Scan hands over, elementwise ops), so it
  /// can run on [n, D] directly. Reads transposedWeights.
  bool expertBodyRankFree(const ir::Block &body) const;
  /// Expert `expertIndex`'s slice of the stacked tensor `stacked` inside
  /// the dispatch body; `slice` is the slice's type.
  /// With `transposedIn` (a value in transposedWeights) the slice is the
  /// transpose of the stacked matrix.
  std::string expertWeight(const std::string &stacked,
                           const ir::TensorType &slice,
                           bool transposedIn = false);
  /// The Scan body's input for the [E, ...] initializer `stacked` of ONNX
  /// element type `onnxType` (each step its expert's slice).
  std::string expertScanInput(const std::string &stacked, int32_t onnxType,
                              bool transposedIn = false);
  /// Fills transposedWeights from the body: the expert weights only read
  /// as 2-D matmul B operands with transpose_b (without, when `columnar`).
  void findTransposedWeights(const ir::Block &body, bool columnar);
  /// Whether the body can run with stacked weights: no quantized reader,
  /// or (a graph of more than --quant-unroll-experts quantized expert
  /// bodies) every quantized matrix readable as a whole [E, ...] stack of
  /// codes.
  bool expertBodyStackable(const ir::Block &body, int64_t experts) const;
  /// Whether a body's matmuls read block-quantized weights.
  bool expertBodyQuantized(const ir::Block &body) const;
  /// The whole stack of codes of a quantized expert matrix read in a Scan
  /// body (a checkpoint stack's, or the per-expert tensors' stacked).
  QuantizedRef scannedQuantizedWeight(const ir::LinearWeightUse &u);
  /// The stacked initializer of a per-expert weight pattern (`{e}` ->
  /// `stacked`).
  static std::string stackedWeightName(const std::string &pattern);

  /// The int64 [L, L] index of a relative_gather op over rows of length
  /// `len` (a [1] tensor): clamp(span + bucket(row - column), 0, 2 span -
  /// 1), or span - bucket(...) with by_key; built once per graph.
  std::string relativeIndex(const ir::Op &op, const std::string &len);

  // LowerSequence.cpp.
  bool lowerSequence(const ir::Op &op);
  /// The length of the graph's growing cache ([1] int64; from a state
  /// input when no op has defined it yet), or "" when the graph has none.
  std::string pastLength();
  /// Fills onceCones and inCone: for each cache computed once, the ops
  /// that compute its entries and feed nothing else, in program order.
  void findOnceCones();
  std::unordered_map<const ir::Op *, std::vector<const ir::Op *>> onceCones;
  std::set<const ir::Op *> inCone;
  /// A cache computed once: If(use_cache, past, its cone and entries).
  bool lowerOnceCache(const ir::Op &op, const std::vector<int64_t> &layout);
  /// T5's relative position bias [1, Hkv, G, S, T] (float32) of an
  /// attention op with relative_bias, queries `q`, keys `keys` (storage
  /// layout, length on axis 2).
  std::string relativeBias(const ir::Op &attn, const std::string &q,
                           const std::string &keys, int64_t kvHeads,
                           int64_t groups);

  // LowerVision.cpp.
  bool lowerVision(const ir::Op &op);
  /// M-RoPE: freqs [axes, B, S, half] to [B, S, half], each frequency from
  /// its position axis (the rope's mrope_section).
  std::string mropeFrequencies(const ir::Op &rope, const std::string &freqs,
                               int64_t half);
  /// `allowed` Or the pairs of one bidirectional run of the call's tokens
  /// (queries `q`, `total` keys); unchanged without the operand.
  std::string bidirectionalRuns(const ir::Op &attn, const std::string &allowed,
                                const std::string &q, const std::string &total);
  /// `allowed` And the key_mask and segments operands ("" = all allowed).
  std::string keyAndSegmentMasks(const ir::Op &attn, std::string allowed);
  // LowerQuantized.cpp: weights stored block-quantized (--quant), as
  // WeightStorage decided.
  const WeightStorage &weightStorage;
  const ir::QuantOptions &quant;
  /// Quantized readers: matmuls of Linear weights (MatMulNBits) and, with
  /// --quant-embeddings, embedding gathers (GatherBlockQuantized).
  const std::map<const ir::Op *, ir::LinearWeightUse> &quantMatmuls;
  const std::set<const ir::Op *> &quantGathers;
  /// Expert slices only quantized matmuls read (no Gather is emitted).
  const std::set<const ir::Op *> &quantSlices;
  /// Params a quantized reader reads: their float form is registered only
  /// if a float reader asks for it.
  const std::set<const ir::Op *> &quantParams;
  /// Experts x quantized MoE layers of the graph: the expert bodies an
  /// unrolled dispatch would copy.
  int64_t quantExpertBodies = 0;
  bool contribOps = false;
  void planQuantization();
  /// The codes' layout: weight `name`'s (an instance) when the checkpoint
  /// stores its codes, else --quant's.
  ir::QuantLayout quantLayout(int64_t rows, int64_t cols, int64_t experts,
                              const std::string &name = "") const;
  /// The checkpoint's packed weight a quantized matmul reads (this expert
  /// body's instance), or null when --quant quantizes it.
  const PackedWeight *packedOf(const ir::LinearWeightUse &u) const;
  /// The first of the `experts` instances of a per-expert weight pattern
  /// when all are packed in one layout without act-order (one stack of
  /// codes can hold them), else null.
  const PackedWeight *commonPacked(const std::string &pattern,
                                   int64_t experts) const;
  bool samePackedLayouts(const ir::LinearWeightUse &u, int64_t experts) const;
  /// `x` gathered along its last axis by `perm`, one Gather per pair.
  std::string permutedInput(const std::string &x,
                            const std::vector<int32_t> &perm);
  /// The weight's name as this expert body instance sees it.
  std::string paramName(const ir::Op &param) const;
  bool lowerQuantizedMatMul(const ir::Op &op, const ir::LinearWeightUse &u);
  bool lowerQuantizedGather(const ir::Op &op);
  /// A grouped projection's batched matmul on its codes, group by group.
  bool lowerGroupedQuantized(const ir::Op &op, const ir::GroupedWeightUse &u);
};

} // namespace archc

#endif // ARCHC_EMIT_ONNXLOWERING_H
