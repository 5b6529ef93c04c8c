//===- WeightStorage.h - How each weight of a model is stored ---*- C++ -*-===//
//
// This file declares WeightStorage, the one place that decides how each
// weight of a module is stored in its ONNX model. A weight is stored
//   - with the checkpoint's own integer codes (GPTQ, AWQ, compressed-tensors
//     pack-quantized; checkpoint/PackedWeights.h), when the checkpoint
//     stores it so and a matmul reads it as a Linear weight: MatMulNBits
//     (or QMoE, or a Scan's stacked codes) gets its codes, scales and zero
//     points bit for bit, an act-order weight its inputs gathered; else
//   - block-quantized by `--quant` (MatMulNBits / GatherBlockQuantized /
//     QMoE codes, scales and zero points in one QuantLayout), when every
//     reader of it can read the codes: the matmuls of a Linear weight
//     (ir::findLinearWeightUses), and with --quant-embeddings the embedding
//     gathers; else
//   - in float, in the model's dtype (a checkpoint's FP8 / FP4 / MXFP4
//     codes, and integer codes no matmul reads as a Linear weight, are
//     dequantized while streaming: exact in float32).
// `--quant` on such a checkpoint keeps what it stores quantized and
// quantizes the rest. The lowering asks it which readers read codes (and
// so which ONNX op each becomes) and their layouts, WeightPlan writes the
// bytes it decided, and the projections left in float are named in a note.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_WEIGHTS_WEIGHTSTORAGE_H
#define ARCHC_EMIT_WEIGHTS_WEIGHTSTORAGE_H

#include "checkpoint/PackedWeights.h"
#include "ir/IR.h"
#include "ir/WeightQuant.h"
#include "support/Diagnostics.h"

#include <map>
#include <memory>
#include <set>
#include <string>

namespace archc {

class WeightStorage {
public:
  /// Decides for `m` under the `--quant` options and the checkpoint's own
  /// quantization (config.json `quantization_config`); `ckpt` (the bound
  /// checkpoint, if any) says which weights it stores as integer codes.
  WeightStorage(const ir::Module &m, const ir::QuantOptions &quant = {},
                const ir::CheckpointQuant &checkpoint = {},
                const Checkpoint *ckpt = nullptr);

  /// How a matmul's weight is stored.
  enum class Kind { Float, Requantized, CheckpointCodes };
  Kind kindOf(const ir::Op *matmul) const;

  /// The `--quant` options (off: every weight float).
  const ir::QuantOptions &quant() const { return quantOptions; }
  /// The checkpoint's own quantization, read while streaming.
  const ir::CheckpointQuant &checkpoint() const { return checkpointQuant; }

  /// The layout of a block-quantized matrix of `rows` outputs x `cols`
  /// inputs (x `experts`), scales in `activations`: the checkpoint's codes
  /// of weight `name` (an instance: layer and expert resolved) when it
  /// stores them, else `--quant`'s.
  ir::QuantLayout layout(int64_t rows, int64_t cols, int64_t experts,
                         ir::DType activations,
                         const std::string &name = "") const;
  /// The checkpoint's packed weight `name` (an instance), or null.
  const PackedWeight *packedWeight(const std::string &name) const;
  /// The catalog of the checkpoint's integer codes (null without one).
  const PackedWeights *packed() const { return packedCatalog.get(); }
  /// Whether any reader reads codes (MatMulNBits and friends).
  bool anyQuantized() const {
    return !matmuls.empty() || !gathers.empty() || !mla.empty() ||
           !grouped.empty();
  }
  /// The tag of the model's file name in a model folder (`q4`, `int8`,
  /// `q4f16`, ...; transformers.js dtypes): --quant's, else the
  /// checkpoint's codes' (int8 when all are 8-bit, q4 otherwise); empty
  /// for a float model.
  std::string fileTag(ir::DType activations) const;

  /// Matmuls that read a Linear weight's codes (MatMulNBits), with the use.
  const std::map<const ir::Op *, ir::LinearWeightUse> &
  quantizedMatmuls() const {
    return matmuls;
  }
  /// MLA kv weights --quant stores as per-head stacks of codes (U_K^T and
  /// U_V), by their mla_attention op.
  const std::map<const ir::Op *, ir::MlaWeightUse> &quantizedMla() const {
    return mla;
  }
  /// Grouped projections --quant stores as ordinary codes read group by
  /// group (DeepSeek-V4's wo_a), by their matmul.
  const std::map<const ir::Op *, ir::GroupedWeightUse> &
  quantizedGrouped() const {
    return grouped;
  }
  /// Embedding gathers that read codes (GatherBlockQuantized).
  const std::set<const ir::Op *> &quantizedGathers() const { return gathers; }
  /// Expert slices only quantized matmuls read (no float slice is emitted).
  const std::set<const ir::Op *> &quantizedSlices() const { return slices; }
  /// Params stored block-quantized: their float form exists only if a float
  /// reader asks for it.
  const std::set<const ir::Op *> &quantizedParams() const { return params; }

  /// With --quant, a note naming every projection weight left in float and
  /// why (ir::findFloatProjections); nothing otherwise.
  void reportFloatProjections(DiagnosticEngine &diags) const;

private:
  const ir::Module &module;
  ir::QuantOptions quantOptions;
  ir::CheckpointQuant checkpointQuant;
  std::unique_ptr<PackedWeights> packedCatalog;
  std::map<const ir::Op *, ir::LinearWeightUse> matmuls;
  std::map<const ir::Op *, ir::MlaWeightUse> mla;
  std::map<const ir::Op *, ir::GroupedWeightUse> grouped;
  /// Matmuls reading the checkpoint's codes.
  std::set<const ir::Op *> checkpointCodes;
  /// The bits of those codes' containers.
  std::set<int> codeBits;
  std::set<const ir::Op *> gathers, slices, params;
};

} // namespace archc

#endif // ARCHC_EMIT_WEIGHTS_WEIGHTSTORAGE_H
