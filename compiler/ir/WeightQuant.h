//===- WeightQuant.h - Which weights are quantized, and their sizes -*- C++
//-*-===//
//
// This file declares what the ONNX back end and the profile share about
// quantized weights: the `--quant` options, a checkpoint's own quantization
// (config.json `quantization_config`), the storage layout of one
// block-quantized matrix (codes, scales, zero points; byte counts), and the
// classification of a module's matmuls into those that read a quantizable
// Linear weight. Both back ends call the same classification, so the
// profile counts exactly the bytes the ONNX writer emits.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IR_WEIGHTQUANT_H
#define ARCHC_IR_WEIGHTQUANT_H

#include "ir/IR.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace archc::ir {

/// `--quant=int4|int8`: weight-only block quantization (ONNX Runtime's
/// MatMulNBits layout: blocks of `block` inputs of one output row).
struct QuantOptions {
  int bits = 0;            ///< 0 = off, 4 or 8
  int64_t block = 32;      ///< inputs per block (power of two, 16..256)
  bool symmetric = true;   ///< false: uint codes with a zero point per block
  bool embeddings = false; ///< also the embedding table (GatherBlockQuantized)
  /// MatMulNBits accuracy_level: 0 (default) keeps the activations in
  /// float (weight-only quantization); 4 lets ONNX Runtime quantize them to
  /// int8 at run time (faster on CPU, esp. for 8-bit weights).
  int accuracyLevel = 0;
  /// The most quantized expert bodies (experts x MoE layers) a graph
  /// unrolls, one MatMulNBits per expert matrix (ONNX Runtime pre-packs
  /// its codes: fast, but the graph grows with them); with more, the
  /// layers no fused op (QMoE) takes run a Scan over the stacked codes, a
  /// graph independent of the expert count.
  int64_t unrollExperts = 256;
  /// --target=ort: 4-bit MoE layers on QMoE too (8-bit ones always are).
  bool qmoeInt4 = false;
  /// Bits of one scale; 0 = the activation dtype's (what the ONNX writer
  /// emits). Runtime presets (w4a16, ...) set their own scale_bits.
  double scaleBits = 0;
  /// --quant-accuracy / --quant-unroll-experts / --quant-qmoe were given:
  /// a model without quantized weights (no --quant, no checkpoint codes)
  /// refuses them.
  bool readerOptionsGiven = false;

  bool enabled() const { return bits != 0; }
};

/// The tag of a quantized model's file name (transformers.js naming):
/// `q4`, `q4f16`, `int8` (transformers.js dtypes), and by the same rule
/// `int8f16`, `q4bf16`, `int8bf16` (none); empty when not quantized.
std::string quantFileTag(const QuantOptions &q, DType activations);

/// How one Linear weight of a GPTQ, AWQ or compressed-tensors checkpoint is
/// quantized (its module's scheme, per config.json `quantization_config`).
struct WeightScheme {
  /// Integer codes (GPTQ, AWQ, pack-quantized) or compressed-tensors'
  /// float-quantized FP8 (e4m3).
  enum class Type { Int, Float };
  Type type = Type::Int;
  int bits = 4;
  /// Inputs sharing one scale: a group size, -1 one scale per output row
  /// (GPTQ group_size -1, compressed-tensors `channel`), 0 one scale for
  /// the whole tensor (`tensor`); FP8 `block`: blockRows x blockCols.
  int64_t group = 128;
  int64_t blockRows = 0, blockCols = 0;
  bool symmetric = true;
  /// GPTQ `desc_act` without `static_groups`, compressed-tensors
  /// `actorder: group`: the checkpoint must hold `g_idx`.
  bool needsGIdx = false;

  /// `int4 g128 sym`, `fp8 channel`, ...
  std::string describe() const;
};

/// A checkpoint's own quantization, from config.json `quantization_config`
/// (and DeepSeek-V4's top-level `expert_dtype`).
struct CheckpointQuant {
  enum class Method { None, FP8, MXFP4, GPTQ, AWQ, CompressedTensors };
  Method method = Method::None;
  /// fp8: `weight_block_size` [rows, cols] of one scale.
  int64_t blockRows = 128, blockCols = 128;
  /// fp8: `scale_fmt: ue8m0` (power-of-two scales).
  bool ue8m0 = false;
  /// DeepSeek-V4: routed experts stored as packed FP4 (`expert_dtype: fp4`).
  bool fp4Experts = false;
  /// GPTQ `checkpoint_format: gptq` (v1): zero points stored minus one.
  bool gptqV1 = true;

  /// Which modules the config quantizes, and how: the first rule whose
  /// pattern matches a module name decides (GPTQModel `dynamic`, `lm_head`,
  /// AWQ `modules_to_not_convert`, compressed-tensors `ignore` and
  /// `config_groups` targets); a module no rule matches takes `defaults`
  /// when `defaultQuantized`.
  struct ModuleRule {
    enum class Match {
      Regex,     ///< Python re.match: anchored at the start only
      Exact,     ///< the whole module name
      Substring, ///< AWQ: the name contains it
      Any,       ///< compressed-tensors target "Linear"
    };
    Match match = Match::Exact;
    std::string pattern;
    bool quantized = true; ///< false: the module stays float
    WeightScheme scheme;
    /// Where the rule comes from, for messages (`ignore 're:.*gate$'`).
    std::string origin;

    bool matches(const std::string &module) const;
  };
  std::vector<ModuleRule> rules;
  WeightScheme defaults;
  bool defaultQuantized = false;

  bool any() const { return method != Method::None; }
  /// GPTQ, AWQ or compressed-tensors: modules resolved by `rules`.
  bool perModule() const {
    return method == Method::GPTQ || method == Method::AWQ ||
           method == Method::CompressedTensors;
  }
  /// The scheme of module `module` (a weight name without `.weight`), or
  /// null when the config leaves it in float; `why` names the deciding
  /// rule (or "no rule").
  const WeightScheme *schemeOf(const std::string &module,
                               std::string *why = nullptr) const;
  /// `fp8 (e4m3, 128x128 blocks)`, `mxfp4`, `gptq (v1, int4 g128 sym)`...
  std::string describe() const;
};

/// Storage of a block-quantized matrix of `rows` outputs x `cols` inputs
/// (per expert for a stacked tensor of `experts` matrices): codes
/// [rows, blocks, block * bits / 8] (input k of a block in the low nibble
/// of byte k / 2 at 4 bits), one scale per (row, block), and for asymmetric
/// schemes zero points [rows, ceil(blocks * bits / 8)] packed the same way.
/// Inputs past `cols` (the last block's padding) hold the zero point.
struct QuantLayout {
  int bits = 4;
  int64_t block = 32;
  int64_t rows = 0, cols = 0;
  int64_t experts = 1; ///< > 1: a stacked [experts, rows, cols] tensor
  bool symmetric = true;
  double scaleBits = 32;

  int64_t blocksPerRow() const { return (cols + block - 1) / block; }
  int64_t blobBytes() const { return block * bits / 8; }
  /// Bytes per expert matrix.
  int64_t codeBytesPerMatrix() const {
    return rows * blocksPerRow() * blobBytes();
  }
  int64_t scalesPerMatrix() const { return rows * blocksPerRow(); }
  int64_t zeroPointBytesPerRow() const {
    return symmetric ? 0 : (blocksPerRow() * bits + 7) / 8;
  }
  /// All bytes of the tensor (codes + scales + zero points, all experts).
  double totalBytes() const;
};

/// A matmul that reads a Linear weight: a param (or one expert's slice of a
/// stacked param) used as the matrix, 2-D per expert, in the model's
/// activation dtype (params pinned to float32 stay float), with more than
/// one output, whose product does not feed a router (`route` logits).
struct LinearWeightUse {
  const Op *matmul = nullptr;
  const Op *param = nullptr; ///< the param op (for a slice: its operand's)
  const Op *slice = nullptr; ///< the expert_slice op, or null
  /// A Reshape splitting the param's first dim into the [E, ...] stack the
  /// slice reads (DBRX's 2-D [E * I, D] experts), or null.
  const Op *reshape = nullptr;
  bool inOut = false;         ///< the weight is [in, out] (no transpose_b)
  int64_t rows = 0, cols = 0; ///< outputs N, inputs K
  int64_t experts = 1;        ///< > 1: the param stacks experts
};

/// The quantizable Linear weights of a module (any IR form: compact, with
/// layer kinds, or expanded).
std::vector<LinearWeightUse> findLinearWeightUses(const Module &m);

/// MLA's latent expansion weight `kv_b_proj` [heads * (nope + v), c], read
/// whole by `mla_attention` (absorbed: q_nope . U_K and o_lat . U_V^T per
/// head). --quant stores it as two stacks of per-head matrices, each
/// quantized along its own inputs: U_K^T [heads, c, nope] (along nope)
/// and U_V [heads, v, c] (along c).
struct MlaWeightUse {
  const Op *op = nullptr;    ///< the mla_attention op
  const Op *param = nullptr; ///< the kv_weight param
  int64_t heads = 0, nope = 0, v = 0, latent = 0;
};

/// The kv weights --quant quantizes: a param in the activation dtype, not
/// pinned to another.
std::vector<MlaWeightUse> findMlaWeightUses(const Module &m);

/// A grouped (block-diagonal) projection: a param [G * R, K] viewed [G, R,
/// K] by a Reshape and read as the transpose_b operand of a batched matmul
/// whose input is [..., G, M, K] (DeepSeek-V4's wo_a). --quant stores it as
/// an ordinary [G * R, K] Linear's codes, read group by group.
struct GroupedWeightUse {
  const Op *matmul = nullptr, *param = nullptr, *reshape = nullptr;
  int64_t groups = 0, rows = 0, cols = 0;
};
std::vector<GroupedWeightUse> findGroupedWeightUses(const Module &m);

/// A matmul whose weight operand is (a view of) a checkpoint weight that
/// --quant leaves in float, and why (-emit=onnx names each one).
struct FloatProjection {
  const Op *matmul = nullptr;
  std::string weight; ///< the weight's name pattern
  std::string reason;
};

/// The matmuls reading a weight (directly or through reshapes, transposes,
/// splits and slices) that are not among `quantized`, with the reason each
/// stays float: a router (routing stays float), a weight read through a
/// view other than a whole expert slice, a weight pinned to a dtype, a
/// shape or dtype MatMulNBits does not take.
std::vector<FloatProjection>
findFloatProjections(const Module &m, const std::set<const Op *> &quantized);

/// Gathers whose table is a param (embedding lookups), in the activation
/// dtype: quantized with `--quant-embeddings`.
std::vector<const Op *> findEmbeddingGathers(const Module &m);

/// Storage bytes of every weight declaration (pattern -> bytes over all its
/// instances) as the ONNX writer emits it under `q`: a weight that only
/// quantized consumers read is stored quantized; one that a float consumer
/// reads as well (a tied table without --quant-embeddings) is stored both
/// ways. `floatBits` gives the bits of a weight stored as float.
struct WeightStorage {
  /// Bits per element of the float form and of the quantized form (the
  /// latter includes scales and zero points) per declaration pattern.
  struct Forms {
    double floatBits = 0; ///< 0 = no float form
    double quantBits = 0; ///< 0 = no quantized form
    double bytes = 0;     ///< over all instances (layers, experts)
  };
  /// Keyed by weightKey(pattern, type): one pattern may declare tensors
  /// of several shapes (e.g. per layer kind).
  std::map<std::string, Forms> byPattern;
  /// Matmul / gather ops that read the quantized form.
  std::set<const Op *> quantizedReaders;
  double totalBytes = 0;
};
WeightStorage computeWeightStorage(const Module &m, const QuantOptions &q);

/// The key of a weight declaration (pattern and type).
std::string weightKey(const std::string &pattern, const TensorType &type);

} // namespace archc::ir

#endif // ARCHC_IR_WEIGHTQUANT_H
