//===- TensorSource.h - A weight's values as float, from anywhere -*- C++
//-*-===//
//
// This file declares FloatSource: random access to the values of one
// logical weight tensor (row-major element indices) as float, whatever
// holds them: a float checkpoint tensor, a block-scaled FP8 tensor, packed
// FP4 with ue8m0 scales, gpt-oss MXFP4 blocks, or generated data. The
// weight writer streams every output (float conversion or quantization)
// through it, so dequantization happens while streaming and memory stays
// bounded by the writer's buffers.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_TENSORSOURCE_H
#define ARCHC_EMIT_TENSORSOURCE_H

#include "checkpoint/Safetensors.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace archc {

class FloatSource {
public:
  virtual ~FloatSource() = default;
  /// Reads logical elements [start, start + count) into `out`. Every value
  /// is checked as it streams: the first non-finite one (a NaN or Inf in a
  /// float checkpoint, a NaN or Inf scale, the e4m3 NaN code, a code times
  /// its scale beyond f32) sets `error`, which names the tensor, the element
  /// and the cause (docs/limits.md, "Weights are validated as they stream").
  void read(uint64_t start, uint64_t count, float *out) {
    readValues(start, count, out);
    if (!error.empty())
      return;
    for (uint64_t i = 0; i < count; ++i)
      if (!std::isfinite(out[i])) {
        error = describeNonFinite(start + i, out[i]);
        return;
      }
  }
  /// The source pages behind [start, start + count) are no longer needed
  /// (keeps memory bounded when streaming a mapped file).
  virtual void release(uint64_t start, uint64_t count) {
    (void)start;
    (void)count;
  }
  /// Bytes of checkpoint data read so far.
  uint64_t bytesRead = 0;
  /// A problem found while reading (e.g. a NaN ue8m0 scale); empty if none.
  std::string error;

protected:
  /// The values of [start, start + count), unchecked.
  virtual void readValues(uint64_t start, uint64_t count, float *out) = 0;
  /// Why logical element `element` came out as `value` (not finite).
  virtual std::string describeNonFinite(uint64_t element, float value) const;
};

/// "NaN", "Inf" or "-Inf".
std::string nonFiniteName(float value);

/// The first element of `count` raw `dtype` values at `p` (F32, F16, BF16,
/// F64) that is not finite, or `count` when all are (other dtypes: all).
uint64_t firstNonFinite(const uint8_t *p, uint64_t count, StDType dtype);

/// Why element `element` of float checkpoint tensor `t` is not finite as
/// f32: "'NAME' holds NaN at element 12 (F32)", or an F64 value beyond f32.
std::string describeNonFiniteElement(const StTensor &t, uint64_t element);

/// Values of float checkpoint tensor `t` (F32, F16, BF16, F64).
std::unique_ptr<FloatSource> plainSource(const StTensor &t,
                                         const MappedFile &file);

/// Fine-grained FP8: `weight` F8_E4M3 [rows, cols] times one scale per
/// `blockRows` x `blockCols` block, `scale` [ceil(rows / br), ceil(cols /
/// bc)] in F32/BF16/F16 (multiplied, DeepSeek-V3's `weight_scale_inv`) or
/// F8_E8M0 (2^(byte - 127), DeepSeek-V4's `.scale`).
std::unique_ptr<FloatSource>
fp8BlockSource(const StTensor &weight, const MappedFile &weightFile,
               const StTensor &scale, const MappedFile &scaleFile,
               int64_t blockRows, int64_t blockCols);

/// DeepSeek-V4 FP4: `packed` I8/U8 [rows, ceil(cols / 2)] of e2m1 codes
/// (element 2j in the low nibble of byte j), `scale` F8_E8M0/U8 [rows,
/// ceil(cols / 32)].
std::unique_ptr<FloatSource> fp4PackedSource(const StTensor &packed,
                                             const MappedFile &packedFile,
                                             const StTensor &scale,
                                             const MappedFile &scaleFile,
                                             int64_t cols);

/// gpt-oss MXFP4: `blocks` U8 [E, R, G, 16] and `scales` U8/F8_E8M0
/// [E, R, G] hold E matrices [R, C] (C <= 32 G; element c of a row is
/// nibble c % 32 of its block, low nibble first). With `transposed` the
/// logical tensor is [E, C, R].
std::unique_ptr<FloatSource> mxfp4Source(const StTensor &blocks,
                                         const MappedFile &blocksFile,
                                         const StTensor &scales,
                                         const MappedFile &scalesFile,
                                         int64_t cols, bool transposed);

/// `--init=random`: deterministic per tensor name and element index.
std::unique_ptr<FloatSource> randomSource(uint64_t seed,
                                          const std::string &name);
/// `--init=zeros` (and the sparse layout).
std::unique_ptr<FloatSource> zeroSource();

/// One e4m3fn byte as float (NaN for S.1111.111).
float decodeE4M3(uint8_t b);
/// One e2m1 nibble as float (0, .5, 1, 1.5, 2, 3, 4, 6 and their negatives).
float decodeE2M1(uint8_t nibble);

} // namespace archc

#endif // ARCHC_EMIT_TENSORSOURCE_H
