//===- StagedFile.h - A file written into a staging directory ---*- C++ -*-===//
//
// This file declares StagedFile: a file of an OutputSet, written in the
// staging directory, appended to or written at offsets (unbuffered: callers
// write large pieces). Errors name the path the file will have once
// published (never the staging path) and the OS reason.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_STAGEDFILE_H
#define ARCHC_SUPPORT_STAGEDFILE_H

#include "support/Diagnostics.h"

#include <cstdint>
#include <string>

namespace archc {

class StagedFile {
public:
  StagedFile() = default;
  StagedFile(const StagedFile &) = delete;
  StagedFile &operator=(const StagedFile &) = delete;
  StagedFile(StagedFile &&other) noexcept;
  ~StagedFile();

  /// Creates `stagedPath`; `shownPath` is the final path used in messages.
  bool open(const std::string &stagedPath, const std::string &shownPath,
            DiagnosticEngine &diags);
  /// Appends bytes after the last byte appended. Reports and returns false
  /// on error (disk full, ...).
  bool write(const void *data, size_t size, DiagnosticEngine &diags);
  /// Writes bytes at byte `offset`; the file grows as needed (a gap never
  /// written reads as zeros) and the append position does not move.
  bool writeAt(uint64_t offset, const void *data, size_t size,
               DiagnosticEngine &diags);
  /// Writes `size` bytes of the open file `srcFd` from `srcOffset` at byte
  /// `offset`, copied by the kernel (copy_file_range, as cp does) where it
  /// can, else from `srcData`, the same bytes in memory.
  bool copyAt(uint64_t offset, int srcFd, uint64_t srcOffset,
              const void *srcData, size_t size, DiagnosticEngine &diags);
  /// Sets the file size (a sparse all-zero tail when growing) and appends
  /// from there.
  bool resize(uint64_t size, DiagnosticEngine &diags);
  /// Syncs and closes the file.
  bool close(DiagnosticEngine &diags);

  /// Whether the file is open.
  bool isOpen() const { return fd >= 0; }
  /// The file's size: the end of the furthest byte written, or the size
  /// set by resize().
  uint64_t size() const { return end; }
  const std::string &shownPath() const { return shown; }

private:
  bool fail(DiagnosticEngine &diags, int err);
  std::string staged, shown;
  int fd = -1;
  uint64_t appendAt = 0, end = 0;
};

} // namespace archc

#endif // ARCHC_SUPPORT_STAGEDFILE_H
