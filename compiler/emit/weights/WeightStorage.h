//===- WeightStorage.h - How each weight of a model is stored ---*- C++ -*-===//
//
// This file declares WeightStorage, the one place that decides how each
// weight of a module is stored in its ONNX model. A weight is stored
//   - in float, in the model's dtype (a checkpoint's own FP8 / FP4 / MXFP4
//     codes are dequantized while streaming: ONNX Runtime has no reader of
//     them), or
//   - block-quantized by `--quant` (MatMulNBits / GatherBlockQuantized /
//     QMoE codes, scales and zero points in one QuantLayout), when every
//     reader of it can read the codes: the matmuls of a Linear weight
//     (ir::findLinearWeightUses), and with --quant-embeddings the embedding
//     gathers.
// The lowering asks it which readers read codes (and so which ONNX op each
// becomes), WeightPlan writes the bytes it decided, and the projections left
// in float are named in a note.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_WEIGHTS_WEIGHTSTORAGE_H
#define ARCHC_EMIT_WEIGHTS_WEIGHTSTORAGE_H

#include "ir/IR.h"
#include "ir/WeightQuant.h"
#include "support/Diagnostics.h"

#include <map>
#include <set>
#include <string>

namespace archc {

class WeightStorage {
public:
  /// Decides for `m` under the `--quant` options and the checkpoint's own
  /// quantization (config.json `quantization_config`).
  WeightStorage(const ir::Module &m, const ir::QuantOptions &quant = {},
                const ir::CheckpointQuant &checkpoint = {});

  /// The `--quant` options (off: every weight float).
  const ir::QuantOptions &quant() const { return quantOptions; }
  /// The checkpoint's own quantization, read while streaming.
  const ir::CheckpointQuant &checkpoint() const { return checkpointQuant; }

  /// The layout of a block-quantized matrix of `rows` outputs x `cols`
  /// inputs (x `experts`), scales in `activations`.
  ir::QuantLayout layout(int64_t rows, int64_t cols, int64_t experts,
                         ir::DType activations) const;

  /// Matmuls that read a Linear weight's codes (MatMulNBits), with the use.
  const std::map<const ir::Op *, ir::LinearWeightUse> &
  quantizedMatmuls() const {
    return matmuls;
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
  std::map<const ir::Op *, ir::LinearWeightUse> matmuls;
  std::set<const ir::Op *> gathers, slices, params;
};

} // namespace archc

#endif // ARCHC_EMIT_WEIGHTS_WEIGHTSTORAGE_H
