//===- QuantizedCheckpoint.h - Binding quantized checkpoints ----*- C++ -*-===//
//
// This file declares CheckpointBinder: it finds how each logical model
// weight is stored in a checkpoint, plain or in the quantized formats of
// the released checkpoints, and checks every quantized tensor against its
// scale sidecar before any data is written:
//
//   fp8 (DeepSeek-V3/V3.1, Kimi-K2, Qwen3-FP8): `W` F8_E4M3 [out, in] and
//       `W_scale_inv` (F32, BF16 or F16) [ceil(out/128), ceil(in/128)]
//       (the block of `weight_block_size`), multiplied; edge blocks partial.
//   fp8 with ue8m0 scales (DeepSeek-V4): `X.weight` F8_E4M3 and `X.scale`
//       F8_E8M0 (2^(byte - 127)) per block.
//   fp4 (DeepSeek-V4 routed experts, `expert_dtype: fp4`): `X.weight` I8
//       [out, in/2] of packed e2m1 (low nibble first) and `X.scale`
//       F8_E8M0 [out, in/32].
//   mxfp4 (gpt-oss experts): `P_blocks` U8 [E, out, in/32, 16] and
//       `P_scales` U8 [E, out, in/32] for the logical `P`, which the model
//       may read transposed ([E, in, out], Hugging Face's dequantised
//       gpt-oss layout).
//
//   gptq / awq / compressed-tensors pack-quantized integer codes
//       (PackedWeights.h), and compressed-tensors float-quantized FP8:
//       `X.weight` F8_E4M3 and `X.weight_scale` per tensor ([1]), channel
//       ([out, 1]) or block.
//
// Missing, misshaped or unused scale sidecars, packed data of the wrong
// size and quantized dtypes without a matching quantization_config are
// errors naming the tensor.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_QUANTIZEDCHECKPOINT_H
#define ARCHC_EMIT_QUANTIZEDCHECKPOINT_H

#include "checkpoint/PackedWeights.h"
#include "checkpoint/Safetensors.h"
#include "checkpoint/TensorSource.h"
#include "ir/WeightQuant.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace archc {

/// How one logical weight is stored.
struct StoredTensor {
  enum class Format { Plain, Fp8Block, Fp4Packed, Mxfp4, Packed };
  Format format = Format::Plain;
  /// Packed: GPTQ / AWQ / compressed-tensors integer codes.
  const PackedWeight *packed = nullptr;
  const StTensor *data = nullptr;  ///< the tensor, codes or blocks
  const StTensor *scale = nullptr; ///< the scale sidecar (quantized only)
  std::vector<int64_t> shape;      ///< logical shape
  bool transposed = false;         ///< Mxfp4: logical [E, in, out]
  int64_t blockRows = 128, blockCols = 128; ///< Fp8Block

  bool quantized() const { return format != Format::Plain; }
  /// Bytes the checkpoint holds for it (data + scale).
  uint64_t storedBytes() const;
};

class CheckpointBinder {
public:
  /// `packed` (optional) is the catalog of the checkpoint's integer codes
  /// the storage decisions used; the binder makes its own otherwise.
  CheckpointBinder(const Checkpoint &ckpt, const ir::CheckpointQuant &q,
                   const PackedWeights *packed = nullptr);

  /// Binds the logical weight `name` [shape]; `inOut`: the model reads a
  /// stacked matrix as [in, out] (decides the MXFP4 orientation). Returns
  /// null after recording the problem.
  const StoredTensor *bind(const std::string &name,
                           const std::vector<int64_t> &shape, bool wantFloat,
                           bool inOut);

  /// Checkpoint tensors no bound weight consumed. With a quantized config,
  /// scale sidecars among them are recorded as errors (`extraScales`).
  std::vector<std::string> unused();

  /// Reports what binding found: missing, mis-shaped, unconvertible and
  /// badly quantized tensors (errors) and unused checkpoint tensors (one
  /// warning; none without `reportUnused`, and none of the names in
  /// `declared`: tensors another graph of a package reads). Returns false if
  /// there was an error.
  bool report(DiagnosticEngine &diags, const std::string &path,
              bool reportUnused = true,
              const std::set<std::string> *declared = nullptr);

  /// The checkpoint tensors binding read (weights and scale sidecars).
  const std::set<std::string> &consumedTensors() const { return consumed; }

  /// The values of a bound weight.
  std::unique_ptr<FloatSource> source(const StoredTensor &t) const;

  std::vector<std::string> missing, misshaped, badType, badQuant;

private:
  const Checkpoint &ckpt;
  ir::CheckpointQuant quant;
  std::unique_ptr<PackedWeights> ownPacked;
  const PackedWeights *packed;
  std::map<std::string, StoredTensor> bound;
  std::set<std::string> consumed;

  const StoredTensor *bindFp8(const std::string &name, const StTensor &w,
                              const std::vector<int64_t> &shape);
  const StoredTensor *bindFp4(const std::string &name, const StTensor &w,
                              const std::vector<int64_t> &shape);
  const StoredTensor *bindPacked(const std::string &name,
                                 const std::vector<int64_t> &shape);
  const StoredTensor *bindMxfp4(const std::string &name,
                                const std::vector<int64_t> &shape, bool inOut);
  /// The scale sidecar of `name` (`name_scale_inv`, or `X.scale` for
  /// `X.weight`); null after recording a problem.
  const StTensor *sidecar(const std::string &name);
  /// Marks the possible sidecars of `name` as read.
  void consumeSidecars(const std::string &name);
};

/// `[a, b, c]`
std::string shapeString(const std::vector<int64_t> &s);

} // namespace archc

#endif // ARCHC_EMIT_QUANTIZEDCHECKPOINT_H
