//===- StagedFile.h - A file written into a staging directory ---*- C++ -*-===//
//
// This file declares StagedFile: a file of an OutputSet, written in the
// staging directory. Errors name the path the file will have once published
// (never the staging path) and the OS reason.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_STAGEDFILE_H
#define ARCHC_SUPPORT_STAGEDFILE_H

#include "support/Diagnostics.h"

#include <cstdint>
#include <cstdio>
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
  /// Appends bytes. Reports and returns false on error (disk full, ...).
  bool write(const void *data, size_t size, DiagnosticEngine &diags);
  /// Sets the file size (a sparse all-zero tail when growing).
  bool resize(uint64_t size, DiagnosticEngine &diags);
  /// Flushes, syncs and closes the file.
  bool close(DiagnosticEngine &diags);

  uint64_t size() const { return written; }
  const std::string &shownPath() const { return shown; }

private:
  bool fail(DiagnosticEngine &diags, int err);
  std::string staged, shown;
  FILE *file = nullptr;
  uint64_t written = 0;
};

} // namespace archc

#endif // ARCHC_SUPPORT_STAGEDFILE_H
