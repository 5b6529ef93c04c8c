//===- PackedWeights.h - GPTQ, AWQ and compressed-tensors codes -*- C++ -*-===//
//
// This file declares the readers of the integer checkpoint formats people
// download, and how each maps onto ONNX Runtime's MatMulNBits exactly:
//
//   GPTQ (`quant_method: gptq`, AutoGPTQ / GPTQModel): `P.qweight` I32
//       [in * b / 32, out] of codes packed along the inputs (low bits first,
//       3-bit codes straddling words), `P.qzeros` I32 [G, out * b / 32]
//       packed along the outputs (v1 `checkpoint_format: gptq` stores
//       zero - 1: read back with GPTQModel's word-level add), `P.scales`
//       F16 [G, out], optional `P.g_idx` I32 [in] (act-order);
//   AWQ GEMM: `P.qweight` I32 [in, out / 8] with the nibble order
//       [0, 2, 4, 6, 1, 3, 5, 7] along the outputs, `P.qzeros` I32
//       [G, out / 8] likewise (no offset), `P.scales` F16 [G, out];
//   compressed-tensors pack-quantized: `P.weight_packed` I32 [out,
//       ceil(in * b / 32)] of codes + 2^(b-1) packed along the inputs,
//       `P.weight_scale` [out, G] / [out, 1] / [1], `P.weight_shape` I64
//       [2], asymmetric `P.weight_zero_point` I32 [ceil(out * b / 32), G]
//       (or the older unpacked I8 [out, G]), optional `P.weight_g_idx`.
//
// W[o, i] = (code[i, o] - zero[g(i), o]) * scale[g(i), o] in every format.
// MatMulNBits gets the same codes, zero points and scales: 2- and 3-bit
// codes in 4-bit containers, 5- to 8-bit ones in 8-bit containers (the
// values are unchanged), blocks of the group size (or a power of two
// dividing it, the scale repeated; 128 for one scale per row), and an
// act-order g_idx as a permutation of the inputs (the model gathers its
// activations; the codes are stored in that order), which is exact when
// every group has the group size.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_CHECKPOINT_PACKEDWEIGHTS_H
#define ARCHC_CHECKPOINT_PACKEDWEIGHTS_H

#include "checkpoint/Safetensors.h"
#include "checkpoint/TensorSource.h"
#include "ir/WeightQuant.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace archc {

/// A Linear weight stored as integer codes, bound to its tensors and
/// checked, with its MatMulNBits mapping.
struct PackedWeight {
  enum class Format { Gptq, Awq, CtPacked };
  Format format = Format::Gptq;
  std::string name;   ///< the logical weight, `P.weight`
  std::string module; ///< `P`
  ir::WeightScheme scheme;
  int64_t rows = 0, cols = 0; ///< outputs, inputs
  /// Inputs per scale (`cols` when one per row or per tensor).
  int64_t groupSize = 0;
  int64_t groups = 1; ///< scale groups per row
  const StTensor *codes = nullptr, *scales = nullptr, *zeros = nullptr,
                 *gIdx = nullptr, *shape = nullptr;
  bool gptqV1 = false;      ///< GPTQ zero points stored minus one
  bool legacyZeros = false; ///< compressed-tensors I8 [out, G], signed
  bool legacyCodes = false; ///< compressed-tensors floor(32 / b) per word
  bool tensorScale = false; ///< one scale for the whole tensor
  /// MatMulNBits: container bits (4 or 8), block size, and whether zero
  /// points are stored (not when all equal the default 2^(bits-1)).
  int containerBits = 4;
  int64_t block = 32;
  bool storeZeros = false;
  /// Act-order: MatMulNBits input j is checkpoint input perm[j] (empty:
  /// the identity).
  std::vector<int32_t> perm;
  /// What is wrong with it (each names a tensor); empty when it binds.
  std::vector<std::string> problems;

  /// Bytes of its checkpoint tensors (codes, scales, zero points, g_idx,
  /// shape).
  uint64_t storedBytes() const;
  /// Its MatMulNBits layout (scales of `scaleBits`).
  ir::QuantLayout layout(double scaleBits) const;
  /// The checkpoint tensors it reads.
  std::vector<const StTensor *> tensors() const;
};

/// Finds, binds and checks the packed weights of a GPTQ, AWQ or
/// compressed-tensors checkpoint on demand (headers, plus the small
/// g_idx and zero-point tensors the checks read).
class PackedWeights {
public:
  PackedWeights(const Checkpoint &ckpt, const ir::CheckpointQuant &quant)
      : ckpt(ckpt), quant(quant) {}

  /// Whether the checkpoint stores the logical weight `name` (`P.weight`)
  /// as codes (`P.qweight` or `P.weight_packed`), whatever their state.
  bool stores(const std::string &name) const;
  /// The packed weight `name` of logical shape `shape` ([out, in]), bound
  /// and checked once (problems recorded in it); null when the checkpoint
  /// does not store it as codes.
  const PackedWeight *find(const std::string &name,
                           const std::vector<int64_t> &shape) const;
  /// A bound packed weight by name (after find), or null.
  const PackedWeight *get(const std::string &name) const;

  /// The dequantized values of a packed weight, [out, in] row-major.
  std::unique_ptr<FloatSource> values(const PackedWeight &w) const;

  const Checkpoint &checkpoint() const { return ckpt; }
  const ir::CheckpointQuant &config() const { return quant; }

private:
  const Checkpoint &ckpt;
  ir::CheckpointQuant quant;
  mutable std::map<std::string, std::unique_ptr<PackedWeight>> bound;

  void bind(PackedWeight &w) const;
};

/// Reads a packed weight's codes, zero points and scales from the mapped
/// checkpoint, and writes its rows in MatMulNBits' layout (PackedCodes.cpp).
class PackedReader {
public:
  PackedReader(const PackedWeight &w, const Checkpoint &ckpt);

  /// Output rows [n0, n0 + count) as MatMulNBits stores them: `codes`
  /// count x blocks x (block * containerBits / 8) bytes (padding inputs of
  /// the last block hold the zero point), `scales` count x blocks floats,
  /// and when `zeroPoints` is given count x ceil(blocks * containerBits /
  /// 8) packed zero points.
  void rows(int64_t n0, int64_t count, uint8_t *codes, float *scales,
            uint8_t *zeroPoints);
  /// The dequantized values of rows [n0, n0 + count), [count, cols],
  /// in the checkpoint's input order.
  void values(int64_t n0, int64_t count, float *out);
  /// Bytes of checkpoint data read so far.
  uint64_t bytesRead() const { return read; }

  /// The unsigned code of input i, output o (checkpoint order).
  unsigned code(int64_t i, int64_t o) const;
  /// The unsigned zero point of scale group g, output o.
  unsigned zero(int64_t g, int64_t o) const;
  float scale(int64_t g, int64_t o) const;
  /// The scale group of input i.
  int64_t groupOf(int64_t i) const;

private:
  const PackedWeight &w;
  const Checkpoint &ckpt;
  std::vector<uint8_t> tile; ///< unpacked codes, [count, cols]

  /// Rows [n0, n0 + count) of codes copied as they are stored, where the
  /// checkpoint's bytes are MatMulNBits' (false: unpack and repack).
  bool copyCodes(int64_t n0, int64_t count, uint8_t *codes);
  uint64_t read = 0;

  void unpack(int64_t n0, int64_t count);
};

} // namespace archc

#endif // ARCHC_CHECKPOINT_PACKEDWEIGHTS_H
