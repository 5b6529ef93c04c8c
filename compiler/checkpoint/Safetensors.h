//===- Safetensors.h - Memory-mapped safetensors checkpoints ----*- C++ -*-===//
//
// This file declares Checkpoint: the tensors of a Hugging Face checkpoint in
// safetensors format, from a single `.safetensors` file, a sharded
// checkpoint (`model.safetensors.index.json`), or a directory holding either.
// Files are memory-mapped; every header is validated (length, JSON, dtypes,
// shapes against byte ranges, ranges inside the file, no overlaps) so a
// truncated or inconsistent file gets a precise error instead of a crash.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_SAFETENSORS_H
#define ARCHC_EMIT_SAFETENSORS_H

#include "support/Diagnostics.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace archc {

/// Element types of safetensors files that archc reads.
enum class StDType {
  F64,
  F32,
  F16,
  BF16,
  I64,
  I32,
  I16,
  I8,
  U8,
  Bool,
  F8E4M3, ///< float8_e4m3fn (FP8 checkpoints)
  F8E8M0  ///< float8_e8m0fnu: 2^(byte - 127) (ue8m0 block scales)
};

/// Bytes per element.
size_t stDTypeSize(StDType t);
const char *stDTypeName(StDType t);

/// One tensor of the checkpoint (a view into a mapped file).
struct StTensor {
  std::string name;
  StDType dtype;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr; ///< first byte
  uint64_t size = 0;             ///< bytes
  size_t file = 0;               ///< index into Checkpoint::files()
};

/// A read-only memory-mapped file.
class MappedFile {
public:
  MappedFile() = default;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();
  bool open(const std::string &path, std::string &error);
  const uint8_t *data() const { return base; }
  uint64_t size() const { return length; }
  const std::string &path() const { return filePath; }
  /// The open file (for copies made by the kernel, copy_file_range), or -1
  /// past the budget of descriptors kept open (the data is then copied
  /// from the mapping; a checkpoint of any number of shards fits the
  /// descriptor limit).
  int descriptor() const { return fd; }
  /// Tells the kernel the range, rounded out to whole pages, is not needed
  /// now (keeps RSS bounded when streaming through a large file; a page
  /// read again later is mapped again from the page cache).
  void release(const uint8_t *begin, uint64_t bytes) const;

private:
  std::string filePath;
  const uint8_t *base = nullptr;
  uint64_t length = 0;
  int fd = -1;
};

class Checkpoint {
public:
  /// Opens a file, an index.json, or a directory. Reports and returns false
  /// on error.
  bool open(const std::string &path, DiagnosticEngine &diags);

  const StTensor *find(const std::string &name) const;
  const std::map<std::string, StTensor> &tensors() const { return byName; }
  const MappedFile &file(size_t i) const { return *mapped[i]; }
  uint64_t totalBytes() const;

private:
  std::vector<std::unique_ptr<MappedFile>> mapped;
  std::map<std::string, StTensor> byName;
  bool openFile(const std::string &path, DiagnosticEngine &diags);
  bool openIndex(const std::string &path, DiagnosticEngine &diags);
};

/// Reads one safetensors header; used by tests and tools.
bool parseSafetensorsHeader(const uint8_t *data, uint64_t size,
                            const std::string &path, std::vector<StTensor> &out,
                            std::string &error);

} // namespace archc

#endif // ARCHC_EMIT_SAFETENSORS_H
