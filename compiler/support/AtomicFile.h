//===- AtomicFile.h - Write-then-rename output files ------------*- C++ -*-===//
//
// This file declares helpers that write output files atomically: data goes
// to a temporary file in the same directory, which is renamed over the
// target only when complete. A failure leaves no file behind.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_ATOMICFILE_H
#define ARCHC_SUPPORT_ATOMICFILE_H

#include "support/Diagnostics.h"

#include <cstdio>
#include <string>
#include <string_view>

namespace archc {

/// Writes `data` to `path` atomically. Reports and returns false on error.
bool writeFileAtomically(const std::string &path, std::string_view data,
                         DiagnosticEngine &diags);

/// A temporary file next to `target` that becomes `target` on commit() and
/// is removed otherwise.
class AtomicFile {
public:
  AtomicFile() = default;
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;
  ~AtomicFile();

  /// Creates the temporary file. Reports and returns false on error.
  bool open(const std::string &target, DiagnosticEngine &diags);
  /// Appends bytes. Reports and returns false on error (disk full, ...).
  bool write(const void *data, size_t size, DiagnosticEngine &diags);
  /// Sets the file size (a sparse all-zero tail when growing).
  bool resize(uint64_t size, DiagnosticEngine &diags);
  /// Flushes, syncs and renames over the target.
  bool commit(DiagnosticEngine &diags);
  /// Removes the temporary file (also done by the destructor).
  void discard();

  const std::string &tempPath() const { return temp; }
  uint64_t bytesWritten() const { return written; }

private:
  std::string target, temp;
  FILE *file = nullptr;
  uint64_t written = 0;
};

} // namespace archc

#endif // ARCHC_SUPPORT_ATOMICFILE_H
