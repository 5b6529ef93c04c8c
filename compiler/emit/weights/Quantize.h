//===- Quantize.h - Block round-to-nearest weight quantization --*- C++ -*-===//
//
// This file declares the quantizer of `--quant`: ONNX Runtime's MLAS
// blockwise round-to-nearest rule, one output row at a time, into the
// MatMulNBits / GatherBlockQuantized layout (ir::QuantLayout).
//
//   symmetric:  scale = m / -2^(bits-1), m = the block's element of largest
//               magnitude (with its sign; the minimum on a tie), and
//               code = clamp(round(w / scale) + 2^(bits-1), 0, 2^bits - 1),
//               i.e. q = code - 2^(bits-1) in [-8, 7] at 4 bits; the zero
//               point is the default 2^(bits-1) and is not stored.
//   asymmetric: lo = min(min w, 0), hi = max(max w, 0),
//               scale = (hi - lo) / (2^bits - 1),
//               zp = clamp(round(-lo / scale), 0, 2^bits - 1),
//               code = clamp(round(w / scale) + zp, 0, 2^bits - 1).
//   Rounding is half away from zero (roundf) of w times the scale's
//   reciprocal; a zero scale gives the zero point. Padding inputs of the
//   last block take the zero point (dequantize to 0).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_QUANTIZE_H
#define ARCHC_EMIT_QUANTIZE_H

#include "ir/WeightQuant.h"

#include <cstdint>

namespace archc {

/// Quantizes one row of `layout.cols` floats: writes
/// `blocksPerRow() * blobBytes()` code bytes, `blocksPerRow()` scales (as
/// float; the writer converts them to the scale dtype) and, when
/// asymmetric, `zeroPointBytesPerRow()` packed zero-point bytes.
/// `scaleRound` rounds a scale to the stored precision before the codes
/// are computed from it (so codes and stored scale agree).
void quantizeRow(const float *row, const ir::QuantLayout &layout,
                 float (*scaleRound)(float), uint8_t *codes, float *scales,
                 uint8_t *zeroPoints);

/// Dequantizes one row (for tests): `cols` floats.
void dequantizeRow(const uint8_t *codes, const float *scales,
                   const uint8_t *zeroPoints, const ir::QuantLayout &layout,
                   float *out);

} // namespace archc

#endif // ARCHC_EMIT_QUANTIZE_H
