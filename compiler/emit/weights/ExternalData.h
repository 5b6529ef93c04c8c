//===- ExternalData.h - The external data files of one model ----*- C++ -*-===//
//
// This file declares ExternalDataWriter, which places a model's initializers
// in its external data files and writes them into an OutputSet. The files
// are named as ONNX Runtime, Optimum and transformers.js expect:
// `<model>.onnx_data`, then `<model>.onnx_data_1`, `_2`, ... once a file
// would pass the chunk limit (browsers cannot load one buffer of 2 GiB or
// more; a tensor larger than the limit gets a file of its own). Offsets are
// 64-byte aligned; the padding is never written (it reads as zeros). Without
// data (the layout of --init=none) the files are sparse.
//
// A placed region is written at offsets into it, in any order (a
// transposed tensor is written band by band, each band's pieces at their
// places): the files stay open until settle() says that every region
// placed so far is written.
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

/// Where a placed tensor's bytes lie.
struct DataRegion {
  unsigned file = 0;   ///< index of its data file (files())
  uint64_t offset = 0; ///< its first byte in that file
  uint64_t bytes = 0;
};

class ExternalDataWriter {
public:
  /// Data of `modelFile`, staged in `set` under `relDir` (the model's
  /// folder relative to the output directory).
  ExternalDataWriter(OutputSet &set, std::string relDir, std::string modelFile,
                     uint64_t chunkLimit, bool layoutOnly,
                     ProgressBar *progress);

  /// Places a tensor of `bytes` bytes after those placed so far (in the
  /// current file, or a new one past the chunk limit).
  bool place(uint64_t bytes, DataRegion &region, DiagnosticEngine &diags);
  /// place(), naming the region's file (relative to the model) and offset;
  /// write() then appends to that region.
  bool place(uint64_t bytes, std::string &location, uint64_t &offset,
             DiagnosticEngine &diags);
  /// Appends bytes to the region last placed by the overload above.
  bool write(const uint8_t *data, uint64_t size, DiagnosticEngine &diags);
  /// The name of a region's file, relative to the model.
  const std::string &location(const DataRegion &region) const {
    return names[region.file];
  }
  /// Writes `size` bytes at `at` bytes into a placed region.
  bool writeAt(const DataRegion &region, uint64_t at, const uint8_t *data,
               uint64_t size, DiagnosticEngine &diags);
  /// writeAt() of bytes that are also `size` bytes of the open file `srcFd`
  /// from `srcOffset`: copied by the kernel (StagedFile::copyAt).
  bool copyAt(const DataRegion &region, uint64_t at, int srcFd,
              uint64_t srcOffset, const uint8_t *data, uint64_t size,
              DiagnosticEngine &diags);
  /// Every region placed so far is written: syncs and closes the files
  /// before the current one.
  bool settle(DiagnosticEngine &diags);
  /// Sizes (layout) and closes every file.
  bool finish(DiagnosticEngine &diags);

  /// The data files, in order.
  const std::vector<std::string> &files() const { return names; }

private:
  bool closeFile(size_t i, DiagnosticEngine &diags);
  bool openChunk(DiagnosticEngine &diags);
  OutputSet &set;
  std::string relDir, modelFile;
  uint64_t limit;
  bool layout;
  ProgressBar *progress;
  std::vector<std::string> names;
  std::vector<uint64_t> ends;      ///< end of each file's last region
  std::vector<StagedFile> streams; ///< one per file; closed once settled
  uint64_t offset = 0;             ///< end of the current file
  DataRegion last;                 ///< placed by place(bytes, location, offset)
  uint64_t lastFill = 0;           ///< ... and written up to here
};

} // namespace archc

#endif // ARCHC_EMIT_EXTERNALDATA_H
