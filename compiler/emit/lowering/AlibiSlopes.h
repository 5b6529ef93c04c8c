//===- AlibiSlopes.h - ALiBi head slopes ------------------------*- C++ -*-===//
//
// This file declares alibiSlopes(): the per-head slopes of ALiBi (Press et
// al.) as Hugging Face's build_alibi_tensor computes them (BLOOM, Falcon):
// for the largest power of two c <= heads, 2^(-8k/c) for k = 1..c, then
// for the remaining heads every other slope of 2c heads, 2^(-4k/c) for
// k = 1, 3, 5, ...
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_ALIBISLOPES_H
#define ARCHC_EMIT_ALIBISLOPES_H

#include <cstdint>
#include <vector>

namespace archc {

/// The slopes of heads 0 .. heads - 1 in float32, each rounded to bfloat16
/// (round to nearest even) when `bf16` (Falcon's `slopes.bfloat16()`).
std::vector<float> alibiSlopes(int64_t heads, bool bf16);

} // namespace archc

#endif // ARCHC_EMIT_ALIBISLOPES_H
