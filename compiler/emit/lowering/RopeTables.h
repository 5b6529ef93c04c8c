//===- RopeTables.h - RoPE inverse frequencies ------------------*- C++ -*-===//
//
// This file declares computeRope(): the inverse frequencies and the cos/sin
// scaling factor of rotary embeddings for every scaling type Hugging Face
// configs use (default, linear, dynamic, llama3, yarn, longrope), following
// transformers' modeling_rope_utils semantics. Types whose frequencies
// depend on the sequence length (dynamic, longrope) return what the graph
// needs to choose at run time.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_ROPETABLES_H
#define ARCHC_EMIT_ROPETABLES_H

#include "ir/IR.h"

#include <string>
#include <vector>

namespace archc {

struct RopeTables {
  std::string type = "default";
  int64_t rotaryDim = 0;
  /// inv_freq[i] for i < rotaryDim / 2 (short factors for longrope).
  std::vector<float> invFreq;
  /// Multiplier of cos and sin (yarn/longrope attention factor).
  double attentionFactor = 1.0;
  // longrope: frequencies once max(position)+1 exceeds `originalMax`.
  std::vector<float> invFreqLong;
  int64_t originalMax = 0;
  // dynamic: base, factor and the length beyond which the base grows.
  double base = 10000.0;
  double factor = 1.0;
  int64_t maxPositions = 0;
};

/// Computes the tables for a `rope` op. Returns false with `error` set when
/// the scaling parameters are incomplete.
bool computeRope(const ir::Op &rope, int64_t headDim, RopeTables &out,
                 std::string &error);

} // namespace archc

#endif // ARCHC_EMIT_ROPETABLES_H
