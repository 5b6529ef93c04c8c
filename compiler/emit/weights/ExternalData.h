//===- ExternalData.h - The external data files of one model ----*- C++ -*-===//
//
// This file declares ExternalDataWriter, which places a model's initializers
// in its external data files and writes them into an OutputSet. The files
// are named as ONNX Runtime, Optimum and transformers.js expect:
// `<model>.onnx_data`, then `<model>.onnx_data_1`, `_2`, ... once a file
// would pass the chunk limit (browsers cannot load one buffer of 2 GiB or
// more; a tensor larger than the limit gets a file of its own). Offsets are
// 64-byte aligned. Without data (the layout of --init=none) the files are
// sparse.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_EXTERNALDATA_H
#define ARCHC_EMIT_EXTERNALDATA_H

#include "support/OutputSet.h"
#include "support/Progress.h"
#include "support/StagedFile.h"

#include <cstdint>
#include <string>
#include <vector>

namespace archc {

/// The largest external data file archc writes by default: under 2 GiB.
constexpr uint64_t kDefaultDataChunkBytes = (uint64_t(2) << 30) - 1;

/// The name of chunk `index` of a model's external data: "model.onnx_data",
/// "model.onnx_data_1", ...
std::string externalDataName(const std::string &modelFile, unsigned index);

/// Whether `name` is an external data file of `modelFile` by archc's
/// naming, old (`model.onnx.data`) or current (`model.onnx_data[_N]`).
bool isExternalDataOf(const std::string &modelFile, const std::string &name);

class ExternalDataWriter {
public:
  /// Data of `modelFile`, staged in `set` under `relDir` (the model's
  /// folder relative to the output directory).
  ExternalDataWriter(OutputSet &set, std::string relDir, std::string modelFile,
                     uint64_t chunkLimit, bool layoutOnly,
                     ProgressBar *progress);

  /// Places a tensor of `bytes` bytes: its file (relative to the model) and
  /// offset. Writes the alignment padding.
  bool place(uint64_t bytes, std::string &location, uint64_t &offset,
             DiagnosticEngine &diags);
  /// Appends bytes of the tensor last placed.
  bool write(const uint8_t *data, uint64_t size, DiagnosticEngine &diags);
  /// Sizes (layout) and closes every file.
  bool finish(DiagnosticEngine &diags);

  /// The data files, in order.
  const std::vector<std::string> &files() const { return names; }

private:
  bool openChunk(DiagnosticEngine &diags);
  OutputSet &set;
  std::string relDir, modelFile;
  uint64_t limit;
  bool layout;
  ProgressBar *progress;
  std::vector<std::string> names;
  std::vector<uint64_t> ends;
  StagedFile current;
  uint64_t offset = 0; ///< end of the current file
};

} // namespace archc

#endif // ARCHC_EMIT_EXTERNALDATA_H
