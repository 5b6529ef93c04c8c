//===- WeightPlan.h - Initializers and their data ---------------*- C++ -*-===//
//
// This file declares WeightPlan, which collects the weight tensors an ONNX
// graph uses (named by the .arch weight patterns, i.e. the Hugging Face
// checkpoint names), checks them against a checkpoint (missing, unexpected,
// mis-shaped, unconvertible), and writes their data: streamed from the
// memory-mapped checkpoint with dtype conversion, generated (random/zeros),
// or left as a sparse all-zero layout. Memory stays bounded by a fixed-size
// conversion buffer, whatever the model size.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_WEIGHTPLAN_H
#define ARCHC_EMIT_WEIGHTPLAN_H

#include "emit/ExternalData.h"
#include "emit/Safetensors.h"
#include "ir/Types.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace archc {

enum class WeightSource { Checkpoint, Random, Zeros, Layout };

/// Counters reported after writing (benchmarks, docs/performance.md).
struct WeightStats {
  uint64_t tensors = 0;
  uint64_t bytesWritten = 0;
  uint64_t bytesRead = 0;
};

class WeightPlan {
public:
  WeightPlan(WeightSource source, const Checkpoint *ckpt, uint64_t seed)
      : source(source), ckpt(ckpt), seed(seed) {}

  /// Registers a weight used by the graph; returns the initializer name.
  const std::string &use(const std::string &name, const ir::TensorType &type);

  /// Checks the registered weights against the checkpoint. Missing,
  /// mis-shaped and unconvertible tensors are errors; checkpoint tensors the
  /// model does not use are reported as a warning. No-op without a
  /// checkpoint.
  /// Without `reportUnused`, checkpoint tensors the plan does not use are
  /// not reported (a package reports them once, over all its graphs);
  /// names in `declared` (tensors the arch's other graphs read) are not
  /// reported either.
  bool validate(DiagnosticEngine &diags, const std::string &ckptPath,
                bool reportUnused = true,
                const std::set<std::string> *declared = nullptr) const;

  /// Whether the plan uses a tensor of that name.
  bool uses(const std::string &name) const { return index.count(name) != 0; }

  /// Adds the initializers to `graph` with their data in external data
  /// files, placed and written by `out` (which it finishes).
  bool writeExternal(onnx::GraphProto &graph, ExternalDataWriter &out,
                     DiagnosticEngine &diags, WeightStats &stats) const;
  /// Adds the initializers with their data inside the model proto;
  /// `progress` (optional) counts the bytes.
  bool embed(onnx::GraphProto &graph, DiagnosticEngine &diags,
             WeightStats &stats, ProgressBar *progress = nullptr) const;

  /// Total bytes of weight data.
  uint64_t totalBytes() const;

private:
  struct Entry {
    std::string name;
    ir::TensorType type;
    std::vector<int64_t> shape;
  };
  WeightSource source;
  const Checkpoint *ckpt;
  uint64_t seed;
  std::vector<Entry> entries;
  std::map<std::string, size_t> index;

  /// Produces the bytes of one tensor in chunks, calling `sink` for each.
  template <typename Sink>
  bool produce(const Entry &e, DiagnosticEngine &diags, WeightStats &stats,
               Sink &&sink) const;
};

} // namespace archc

#endif // ARCHC_EMIT_WEIGHTPLAN_H
