//===- Passes.h - Pass factories and registry -------------------*- C++ -*-===//
//
// This file declares every pass factory and the registry that maps pass
// names (as used by --passes) to them.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_PASSES_PASSES_H
#define ARCHC_PASSES_PASSES_H

#include "passes/Pass.h"

#include <functional>

namespace archc {

/// Infers every value's dtype and symbolic shape (worklist over ops).
std::unique_ptr<Pass> createShapeInferencePass();
/// Adds decode-time state I/O (`past_key_values.{i}.<name>` /
/// `present.{i}.<name>`) for every `cache` op, and `attention_mask`
/// [batch, past + seq] wired to every attention op.
std::unique_ptr<Pass> createKVCachePass();
/// Single-pass form: adds `attention_mask` [batch, seq] only.
std::unique_ptr<Pass> createAttentionMaskPass();
/// Unrolls `repeat` ops into one copy per layer with concrete names.
std::unique_ptr<Pass> createExpandRepeatPass();
/// Removes ops whose results are unused (weight declarations stay).
std::unique_ptr<Pass> createDeadCodePass();

struct PassInfo {
  std::string name;
  std::string summary;
  std::function<std::unique_ptr<Pass>()> create;
};
/// The registry, in a fixed order.
const std::vector<PassInfo> &passRegistry();
const PassInfo *lookupPass(const std::string &name);

} // namespace archc

#endif // ARCHC_PASSES_PASSES_H
